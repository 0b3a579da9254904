package liquid_test

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentry/agentry/prompt"
	_ "github.com/agentry/agentry/prompt/liquid"
)

// TestRender: Liquid templates render with their filters and tags; a
// strict render names the variables missing (one only tested answers
// false), and what the scan cannot see is required by required_vars.
func TestRender(t *testing.T) {
	for _, tc := range []struct {
		name   string
		t      prompt.Template
		params map[string]any
		strict bool
		want   string // the text, or the error's
		err    bool
	}{
		{"liquid", prompt.Template{ID: "a", Engine: prompt.Liquid, Text: "Hi {{ name | upcase }}{% if vip %}!{% endif %} {% for t in tools %}{{ t }},{% endfor %}"},
			map[string]any{"name": "Ada", "vip": true, "tools": []any{"a", "b"}}, true, "Hi ADA! a,b,", false},
		{"strict liquid, a condition absent", prompt.Template{ID: "a", Engine: prompt.Liquid, Text: "{% if vip %}Dear {% endif %}{{ name }}"},
			map[string]any{"name": "Ada"}, true, "Ada", false},
		{"strict liquid missing", prompt.Template{ID: "a", Version: "1", Engine: prompt.Liquid, Text: "{% assign g = 'Hi' %}{{ g }} {{ name }} of {% for c in cities %}{{ c }}{% endfor %}"},
			map[string]any{}, true, "missing variables name, cities", true},
		{"lenient liquid", prompt.Template{ID: "a", Engine: prompt.Liquid, Text: "Hi {{ name }}."}, nil, false, "Hi .", false},
		{"liquid required where the scan cannot see", prompt.Template{ID: "a", Version: "1", Engine: prompt.Liquid, Text: "{{ user[key] }}", RequiredVars: []string{"key"}},
			map[string]any{"user": map[string]any{}}, true, "missing variables key", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r, err := tc.t.Render(tc.params, tc.strict)
			switch {
			case tc.err:
				var me *prompt.MissingError
				if !errors.As(err, &me) || !strings.Contains(err.Error(), tc.want) {
					t.Errorf("Render = %v, want %q", err, tc.want)
				}
			case err != nil || r.Text != tc.want:
				t.Errorf("Render = %+v, %v; want %q", r, err, tc.want)
			}
		})
	}
}

// TestLiquidReadsNoFile: a Liquid template from a store (anyone who may
// put a prompt) cannot read a file of the host into a prompt: include
// and render are refused, by path or by a variable's value.
func TestLiquidReadsNoFile(t *testing.T) {
	dir := t.TempDir()
	secret := filepath.Join(dir, "secret.txt")
	if err := os.WriteFile(secret, []byte("the-host-secret"), 0o600); err != nil {
		t.Fatal(err)
	}
	wd, _ := os.Getwd()
	rel, err := filepath.Rel(wd, secret) // Liquid's include reads from the working directory
	if err != nil {
		t.Fatal(err)
	}
	for _, text := range []string{
		`{% include "` + rel + `" %}`,
		`{% include "` + secret + `" %}`,
		`{% include {{ path }} %}`,
		`{% render "` + rel + `" %}`,
	} {
		t.Run(text, func(t *testing.T) {
			tm := prompt.Template{ID: "a", Version: "1", Engine: prompt.Liquid, Text: text}
			r, err := tm.Render(map[string]any{"path": secret}, false)
			if err == nil || strings.Contains(r.Text, "the-host-secret") {
				t.Errorf("rendered %q, %v: a file was read", r.Text, err)
			}
		})
	}
}
