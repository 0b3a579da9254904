package react

import (
	"encoding/json"
	"strings"

	"github.com/agentry/agentry/prompt"
)

// Templates returns the built-in system prompt templates as templates of
// the prompt store (id "react", engine go, the version as react_template
// names it: "v1"), so that a user can copy one, change it and put it
// under an id of their own.
func Templates() []prompt.Template {
	var out []prompt.Template
	for _, v := range Versions() {
		text, _ := templateFS.ReadFile("templates/" + v + ".tmpl")
		out = append(out, prompt.Template{ID: "react", Version: v, Engine: prompt.Go, Text: string(text),
			Metadata: map[string]any{"tags": []any{"react", "builtin"}}, CreatedBy: "agentry"})
	}
	return out
}

// Render renders a template of the prompt store as the ReAct system
// prompt: its fields are those of PromptData ({{.Role}}, {{range
// .Tools}}{{.Name}}…).
func Render(t *prompt.Template, d PromptData) (string, error) {
	var params map[string]any
	data, _ := json.Marshal(d) // plain fields
	json.Unmarshal(data, &params)
	r, err := t.Render(params, false)
	if err != nil {
		return "", err
	}
	return strings.TrimSpace(r.Text), nil
}
