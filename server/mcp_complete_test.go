package server

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/agentry/agentry/agent"
	"github.com/agentry/agentry/prompt"
	"github.com/agentry/agentry/spec"
)

// TestMCPCompletion: completion/complete completes a served prompt's
// argument with the values the agents that use the template take for
// that input (its input schema's enum, its default), those that begin with what was
// typed; an argument or a prompt not served, or a resource, is an error.
func TestMCPCompletion(t *testing.T) {
	triage := prompt.Template{ID: "triage", Version: "v1", Text: "Sort the ticket of ${customer}: ${ticket}"}
	f := newFixture(t, Config{Prompts: prompt.Fixed(triage)})
	a, err := agent.New(&spec.Spec{AgentName: "sorter", Version: "v1", PromptRef: "triage", InputSchema: json.RawMessage(`{"type": "object",
		"properties": {"customer": {"type": "string", "enum": ["Ada", "Adele", "Bob"]}, "ticket": {"type": "string", "default": "refund"}}}`)},
		agent.WithPrompts(prompt.Fixed(triage)), agent.WithProvider(&listener{}, "test"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { a.Close() })
	if err := f.srv.cfg.Agents.Register(a); err != nil {
		t.Fatal(err)
	}
	cs, err := mcpClient(t, f, "", nil)
	if err != nil {
		t.Fatal(err)
	}
	if cs.InitializeResult().Capabilities.Completions == nil {
		t.Error("the server does not declare completions")
	}
	for _, tc := range []struct {
		name       string
		ref        *sdk.CompleteReference
		arg, typed string
		want       string // the values, or the error's words
	}{
		{"typed", &sdk.CompleteReference{Type: "ref/prompt", Name: "triage"}, "customer", "ad", "[Ada Adele]"},
		{"nothing typed", &sdk.CompleteReference{Type: "ref/prompt", Name: "triage"}, "customer", "", "[Ada Adele Bob]"},
		{"a default", &sdk.CompleteReference{Type: "ref/prompt", Name: "triage"}, "ticket", "", "[refund]"},
		{"nothing matches", &sdk.CompleteReference{Type: "ref/prompt", Name: "triage"}, "customer", "zed", "[]"},
		{"no such argument", &sdk.CompleteReference{Type: "ref/prompt", Name: "triage"}, "nope", "", `no argument "nope"`},
		{"no such prompt", &sdk.CompleteReference{Type: "ref/prompt", Name: "nobody"}, "x", "", "prompt nobody"},
		{"a resource", &sdk.CompleteReference{Type: "ref/resource", URI: "file:///x"}, "x", "", "no resources"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res, err := cs.Complete(context.Background(), &sdk.CompleteParams{Ref: tc.ref, Argument: sdk.CompleteParamsArgument{Name: tc.arg, Value: tc.typed}})
			switch {
			case strings.HasPrefix(tc.want, "["):
				if err != nil || fmt.Sprint(res.Completion.Values) != tc.want || res.Completion.Values == nil {
					t.Errorf("%+v, %v; want %s", res, err, tc.want)
				}
			case err == nil || !strings.Contains(err.Error(), tc.want):
				t.Errorf("%v, want an error saying %q", err, tc.want)
			}
		})
	}
}
