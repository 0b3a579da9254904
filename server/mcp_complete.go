package server

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/agentry/agentry/prompt"
)

// maxCompletions is the most values a completion answers (MCP's limit).
const maxCompletions = 100

// complete answers completion/complete for an argument of a prompt the
// server serves (a template of the prompt store): the values the served
// agents that use the template (prompt_ref) take for that input (their
// input schema's enum and default) that begin with what was typed (case
// aside). A
// resource, a prompt not served, or an argument the template does not
// have is an error naming it.
func (s *Server) complete(ctx context.Context, req *sdk.CompleteRequest) (*sdk.CompleteResult, error) {
	p := req.Params
	switch {
	case p.Ref == nil || p.Ref.Type != "ref/prompt":
		return nil, fmt.Errorf("completion/complete: agentry serves prompts, no resources: complete a ref/prompt's argument")
	case s.cfg.Prompts == nil:
		return nil, fmt.Errorf("completion/complete: no prompt is served")
	}
	t, err := s.cfg.Prompts.Get(ctx, p.Ref.Name, "")
	if err != nil {
		return nil, fmt.Errorf("completion/complete: prompt %s: %w", p.Ref.Name, err)
	}
	vars, _ := t.Vars()
	if !slices.Contains(vars, p.Argument.Name) {
		return nil, fmt.Errorf("completion/complete: prompt %s has no argument %q (it has %s)", t.ID, p.Argument.Name, strings.Join(vars, ", "))
	}
	typed := strings.ToLower(p.Argument.Value)
	var values []string
	for _, v := range s.argumentValues(&t, p.Argument.Name) {
		if strings.HasPrefix(strings.ToLower(v), typed) && !slices.Contains(values, v) {
			values = append(values, v)
		}
	}
	res := &sdk.CompleteResult{Completion: sdk.CompletionResultDetails{Values: values, Total: len(values)}}
	if len(values) > maxCompletions {
		res.Completion.Values, res.Completion.HasMore = values[:maxCompletions], true
	}
	if res.Completion.Values == nil {
		res.Completion.Values = []string{} // "values" is required, if empty
	}
	return res, nil
}

// argumentValues are the values the served agents whose prompt is the
// template t take for the input arg: its input_schema property's enum,
// then its default.
func (s *Server) argumentValues(t *prompt.Template, arg string) []string {
	var out []string
	for _, a := range s.cfg.Agents.Agents() {
		sp := a.Spec()
		if id, _, _ := strings.Cut(sp.PromptRef, "@"); sp.PromptRef == "" || id != t.ID || len(sp.InputSchema) == 0 {
			continue
		}
		var in struct {
			Properties map[string]struct {
				Enum    []any `json:"enum"`
				Default any   `json:"default"`
			} `json:"properties"`
		}
		if json.Unmarshal(sp.InputSchema, &in) != nil {
			continue
		}
		prop := in.Properties[arg]
		for _, v := range prop.Enum {
			out = append(out, valueText(v))
		}
		if prop.Default != nil {
			out = append(out, valueText(prop.Default))
		}
	}
	return out
}

// valueText is a JSON value as an argument's text: a string as it is.
func valueText(v any) string {
	if s, ok := v.(string); ok {
		return s
	}
	b, _ := json.Marshal(v)
	return string(b)
}
