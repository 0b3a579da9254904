package react

import (
	"bytes"
	"embed"
	"fmt"
	"slices"
	"strings"
	"text/template"
)

//go:embed templates/*.tmpl
var templateFS embed.FS

// TemplateVersion is the newest system prompt template.
const TemplateVersion = "v1"

var templates = func() map[string]*template.Template {
	out := map[string]*template.Template{}
	entries, _ := templateFS.ReadDir("templates")
	for _, e := range entries {
		v := strings.TrimSuffix(e.Name(), ".tmpl")
		out[v] = template.Must(template.New(v).ParseFS(templateFS, "templates/"+e.Name())).Lookup(e.Name())
	}
	return out
}()

// Versions returns the template versions, sorted.
func Versions() []string {
	var vs []string
	for v := range templates {
		vs = append(vs, v)
	}
	slices.Sort(vs)
	return vs
}

// Tool is a tool as the prompt lists it.
type Tool struct {
	Name, Description string
	// Parameters is the JSON Schema of its input, as text.
	Parameters string
}

// PromptData fills the system prompt template.
type PromptData struct {
	Role         string
	Capabilities string
	Tools        []Tool
	// Examples are few-shot examples, each shown as written.
	Examples []string
	// OutputSchema, when set, is the JSON Schema the final answer must meet.
	OutputSchema string
	MaxTurns     int
	BudgetUSD    float64
	Timeout      string
	Task         string
}

// SystemPrompt renders the system prompt of the given template version
// ("" for the newest).
func SystemPrompt(version string, d PromptData) (string, error) {
	if version == "" {
		version = TemplateVersion
	}
	t, ok := templates[version]
	if !ok {
		return "", fmt.Errorf("react: no prompt template %q (have %s)", version, strings.Join(Versions(), ", "))
	}
	var b bytes.Buffer
	if err := t.Execute(&b, d); err != nil {
		return "", fmt.Errorf("react: template %s: %w", version, err)
	}
	return strings.TrimSpace(b.String()), nil
}

// ParseErrorObservation is what the model is told when its reply could not
// be used.
func ParseErrorObservation(problem string) string {
	return "Your reply could not be used: " + problem + ".\n" +
		"Reply with\nThought: {your reasoning}\nAction: {tool_name}\nAction Input: {json_input}\n" +
		"or with\nThought: {your reasoning}\nFinal Answer: {result}"
}

// Stop is the stop sequence that keeps a model from writing the
// observation itself.
const Stop = "\nObservation:"
