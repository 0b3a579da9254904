package prompt

import (
	"context"
	"errors"
	"strings"
	"testing"
)

func TestValidate(t *testing.T) {
	for _, tc := range []struct {
		name string
		t    Template
		want string // "" when valid
	}{
		{"fstring", Template{ID: "a", Text: "Hi ${name}", RequiredVars: []string{"name"}}, ""},
		{"go", Template{ID: "a", Engine: Go, Text: "Hi {{.name}}{{if .title}} ({{.title}}){{end}}", RequiredVars: []string{"name", "title"}}, ""},
		{"mustache", Template{ID: "a", Engine: Mustache, Text: "Hi {{name}}{{#items}}{{.}}{{/items}}", RequiredVars: []string{"items"}}, ""},
		{"no id", Template{Text: "x"}, `id ""`},
		{"bad id", Template{ID: "a/b", Text: "x"}, `id "a/b"`},
		{"empty text", Template{ID: "a", Text: " "}, "text is empty"},
		{"unknown engine", Template{ID: "a", Engine: "jinja", Text: "x"}, `engine "jinja": want fstring, go, mustache, handlebars or liquid`},
		{"go syntax", Template{ID: "a", Engine: Go, Text: "{{.name"}, "text (go)"},
		{"mustache syntax", Template{ID: "a", Engine: Mustache, Text: "{{#a}}x"}, "text (mustache)"},
		{"unclosed fstring", Template{ID: "a", Text: "Hi ${name"}, "unclosed ${"},
		{"required unused", Template{ID: "a", Text: "Hi ${name}", RequiredVars: []string{"name", "city"}}, `required_vars[1] "city": the text does not use it`},
		{"bad few_shot", Template{ID: "a", Text: "x", Metadata: map[string]any{"few_shot": []any{map[string]any{"question": "q"}}}}, "metadata.few_shot"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			probs := strings.Join(Validate(tc.t), "; ")
			if tc.want == "" && probs != "" || tc.want != "" && !strings.Contains(probs, tc.want) {
				t.Errorf("Validate = %q, want %q", probs, tc.want)
			}
		})
	}
}

func TestTemplateRender(t *testing.T) {
	for _, tc := range []struct {
		name   string
		t      Template
		params map[string]any
		strict bool
		want   string // the text, or the error's
		err    bool
	}{
		{"fstring", Template{ID: "a", Text: "Hi ${name}, ${n} left"}, map[string]any{"name": "Ada", "n": 3}, true, "Hi Ada, 3 left", false},
		{"go", Template{ID: "a", Engine: Go, Text: "Hi {{.name}}{{if .vip}}!{{end}}"}, map[string]any{"name": "Ada", "vip": true}, true, "Hi Ada!", false},
		{"mustache unescaped", Template{ID: "a", Engine: Mustache, Text: "Hi {{name}}"}, map[string]any{"name": "<Ada & co>"}, true, "Hi <Ada & co>", false},
		{"strict missing", Template{ID: "a", Version: "2", Text: "Hi ${name} from ${city}"}, map[string]any{}, true, "prompt a@2: missing variables name, city", true},
		{"lenient missing", Template{ID: "a", Text: "Hi ${name}."}, map[string]any{}, false, "Hi .", false},
		{"lenient go", Template{ID: "a", Engine: Go, Text: "Hi {{.name}}."}, nil, false, "Hi .", false},
		{"lenient go range", Template{ID: "a", Engine: Go, Text: "Tools:{{range .tools}} {{.Name}}{{end}}."}, nil, false, "Tools:.", false},
		{"lenient mustache", Template{ID: "a", Engine: Mustache, Text: "Hi {{name}}."}, nil, false, "Hi .", false},
		{"required even lenient", Template{ID: "a", Version: "1", Text: "Hi ${name}", RequiredVars: []string{"name"}}, nil, false, "missing variables name", true},
		{"strict handlebars, a condition absent", Template{ID: "a", Engine: Handlebars, Text: "{{#if vip}}Dear {{/if}}{{name}}"},
			map[string]any{"name": "Ada"}, true, "Ada", false},
		{"strict handlebars, a condition also shown", Template{ID: "a", Version: "1", Engine: Handlebars, Text: "{{#if vip}}{{vip}} {{/if}}{{name}}"},
			map[string]any{"name": "Ada"}, true, "missing variables vip", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r, err := tc.t.Render(tc.params, tc.strict)
			switch {
			case tc.err:
				var me *MissingError
				if !errors.As(err, &me) || !strings.Contains(err.Error(), tc.want) {
					t.Errorf("Render = %v, want %q", err, tc.want)
				}
			case err != nil || r.Text != tc.want || r.Tokens != (len(tc.want)+3)/4:
				t.Errorf("Render = %+v, %v; want %q", r, err, tc.want)
			}
		})
	}
}

func TestParseRef(t *testing.T) {
	for _, tc := range []struct {
		ref, id, version string
		err              bool
	}{
		{"greet", "greet", "", false}, {"greet@2", "greet", "2", false}, {"greet@v3", "greet", "v3", false},
		{"greet@1.2.0", "greet", "1.2.0", false}, {"greet@v1.2.0-rc.1", "greet", "v1.2.0-rc.1", false}, {"greet@draft", "greet", "draft", false},
		{"greet@", "", "", true}, {"greet@../x", "", "", true}, {"greet@a/b", "", "", true}, {"greet@.x", "", "", true},
		{"@1", "", "", true}, {"a b@1", "", "", true},
	} {
		id, v, err := ParseRef(tc.ref)
		if (err != nil) != tc.err || id != tc.id || v != tc.version {
			t.Errorf("ParseRef(%q) = %q, %q, %v", tc.ref, id, v, err)
		}
		if err != nil && !errors.Is(err, ErrInvalid) {
			t.Errorf("ParseRef(%q): %v is not ErrInvalid", tc.ref, err)
		}
	}
}

// A directory of files: versions by name, the latest by default, few-shot
// examples from metadata, a file whose content disagrees with its path
// refused, and no writes.
func TestDir(t *testing.T) {
	ctx := context.Background()
	d := Dir("testdata/prompts")
	latest, err := d.Get(ctx, "greet", "")
	if err != nil || latest.Version != "2" || latest.Engine != Mustache {
		t.Fatalf("latest = %+v, %v", latest, err)
	}
	r, err := latest.Render(map[string]any{"name": "Ada", "place": "Lisbon"}, true)
	if err != nil || r.Text != "Hello Ada, welcome to Lisbon." || len(r.Examples) != 1 || r.Examples[0].Input != "Ada" {
		t.Errorf("render v2 = %+v, %v", r, err)
	}
	v1, err := d.Get(ctx, "greet", "1")
	if r, _ := v1.Render(map[string]any{"name": "Ada"}, true); err != nil || r.Text != "Hello Ada." || v1.Name != "Greeting" {
		t.Errorf("v1 = %+v, %v", r, err)
	}
	if _, err := d.Get(ctx, "greet", "9"); !errors.Is(err, ErrNotFound) {
		t.Errorf("a missing version: %v", err)
	}
	if _, err := d.Get(ctx, "bad", "1"); !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), "holds other@1") {
		t.Errorf("a file at the wrong path: %v", err)
	}
	if _, err := d.Put(ctx, v1); !errors.Is(err, ErrReadOnly) {
		t.Errorf("Put = %v", err)
	}
	all, err := d.List(ctx, Filter{ID: "greet", AllVersions: true})
	if err != nil || len(all) != 2 || all[0].Version != "1" {
		t.Errorf("List all versions = %+v, %v", all, err)
	}
	tagged, err := d.List(ctx, Filter{Tag: "demo", ID: "greet"})
	if err != nil || len(tagged) != 1 || tagged[0].Version != "2" {
		t.Errorf("List by tag = %+v, %v", tagged, err)
	}
}

// Layered stores: the first that has an id answers for it; Put goes to
// the first; a read-only first refuses.
func TestLayered(t *testing.T) {
	ctx := context.Background()
	builtin := Fixed(Template{ID: "react", Version: "1", Text: "r1"}, Template{ID: "react", Version: "2", Text: "r2"},
		Template{ID: "greet", Version: "1", Text: "shadowed"})
	l := Layered(Dir("testdata/prompts"), builtin)
	for _, tc := range []struct {
		id, version, want string
	}{
		{"greet", "1", "Hello ${name}."}, {"react", "", "r2"}, {"react", "1", "r1"}, {"react", "v1", "r1"},
	} {
		got, err := l.Get(ctx, tc.id, tc.version)
		if err != nil || got.Text != tc.want {
			t.Errorf("Get(%s, %q) = %q, %v; want %q", tc.id, tc.version, got.Text, err, tc.want)
		}
	}
	if _, err := l.Get(ctx, "nope", ""); !errors.Is(err, ErrNotFound) {
		t.Errorf("Get(nope) = %v", err)
	}
	if _, err := l.Put(ctx, Template{ID: "x", Text: "x"}); !errors.Is(err, ErrReadOnly) {
		t.Errorf("Put through a read-only first store = %v", err)
	}
	list, err := l.List(ctx, Filter{ID: "react", AllVersions: true})
	if err != nil || len(list) != 2 || list[1].Text != "r2" {
		t.Errorf("List(react) = %+v, %v", list, err)
	}
	if list, _ := l.List(ctx, Filter{ID: "greet", AllVersions: true}); len(list) != 2 || list[0].Text != "Hello ${name}." {
		t.Errorf("a lower store's versions of an id the first has: %+v", list)
	}
}
