package prompt

import (
	"errors"
	"testing"
)

// Any text, with any engine: Validate and Render never panic, and a
// template Validate accepts renders strictly once every variable it uses
// is given.
func FuzzTemplate(f *testing.F) {
	for _, seed := range []struct {
		engine, text string
	}{
		{"fstring", "Hi ${name}, $${literal} ${ spaced }"},
		{"go", "Hi {{.name}}{{if .vip}}!{{end}}{{range .items}}{{.}}{{end}}"},
		{"mustache", "Hi {{name}}{{#items}}{{.}}{{/items}}{{^none}}-{{/none}}{{{raw}}}"},
		{"go", `{{template "x"}}`},
		{"mustache", "{{> partial}}{{=<% %>=}}<% name %>"},
	} {
		f.Add(seed.engine, seed.text)
	}
	f.Fuzz(func(t *testing.T, engine, text string) {
		tpl := Template{ID: "f", Version: "1", Engine: Engine(engine), Text: text}
		probs := Validate(tpl)
		used, err := vars(tpl.Engine, text)
		if err != nil || len(probs) > 0 {
			return
		}
		params := map[string]any{}
		for _, v := range used {
			params[v] = "x"
		}
		// A template's own execution may fail ({{index .x 9}}), but never
		// for a variable that was given.
		var me *MissingError
		if _, err := tpl.Render(params, true); errors.As(err, &me) {
			t.Errorf("every variable was given, yet: %v", err)
		}
	})
}
