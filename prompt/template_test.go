package prompt

import (
	"slices"
	"strings"
	"testing"
)

func TestRender(t *testing.T) {
	vars := map[string]any{"city": "Lisbon", "days": 3, "tags": []string{"a"}}
	tests := []struct{ in, want, err string }{
		{"Go to ${city} for ${days} days", "Go to Lisbon for 3 days", ""},
		{"${ city } ${tags}", `Lisbon ["a"]`, ""},
		{"literal $${city} and $5", "literal ${city} and $5", ""},
		{"no vars", "no vars", ""},
		{"${missing}", "", `system_text uses ${missing} but the input has no "missing"`},
		{"${unclosed", "", "unclosed"},
	}
	for _, tt := range tests {
		got, err := Render("system_text", tt.in, vars)
		if tt.err != "" {
			if err == nil || !strings.Contains(err.Error(), tt.err) {
				t.Errorf("Render(%q) err = %v, want %q", tt.in, err, tt.err)
			}
			continue
		}
		if err != nil || got != tt.want {
			t.Errorf("Render(%q) = %q, %v; want %q", tt.in, got, err, tt.want)
		}
	}
	if v := Vars("a ${x} $${y} ${z}"); !slices.Equal(v, []string{"x", "z"}) {
		t.Errorf("Vars = %v", v)
	}
}

func TestHandlebars(t *testing.T) {
	tpl := Template{ID: "h", Version: "1", Engine: Handlebars, RequiredVars: []string{"name"},
		Text: `Hello {{name}}{{#if vip}} (VIP){{/if}}.{{#each items}} {{this}}{{/each}} {{lookup prefs "tone"}} <{{raw}}>`}
	if probs := Validate(tpl); len(probs) != 0 {
		t.Fatalf("Validate: %v", probs)
	}
	used, err := vars(Handlebars, tpl.Text)
	if err != nil || strings.Join(used, ",") != "name,vip,items,prefs,raw" {
		t.Errorf("vars %v, %v", used, err)
	}
	r, err := tpl.Render(map[string]any{"name": "Ada", "vip": true, "items": []any{"a", "b"}, "prefs": map[string]any{"tone": "dry"}, "raw": "x & y"}, false)
	if err != nil || r.Text != "Hello Ada (VIP). a b dry <x & y>" {
		t.Errorf("render %q, %v", r.Text, err)
	}
	if _, err := tpl.Render(map[string]any{}, false); err == nil {
		t.Error("a missing required var was accepted")
	}
	if probs := Validate(Template{ID: "h", Version: "1", Engine: Handlebars, Text: "{{#if x}}"}); len(probs) == 0 {
		t.Error("an unclosed block was accepted")
	}
}
