package agent

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentry/agentry/llm"
	"github.com/agentry/agentry/llm/scripted"
	"github.com/agentry/agentry/policy"
	"github.com/agentry/agentry/prompt"
	"github.com/agentry/agentry/spec"
	"github.com/agentry/agentry/store/sqlite"
)

// promptStore is a prompt store with greet@1 (fstring) and greet@2
// (mustache, with a few-shot example), and a ReAct template of its own.
func promptStore(t *testing.T) prompt.Store {
	t.Helper()
	st, err := sqlite.Open(context.Background(), filepath.Join(t.TempDir(), "agentry.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	ps := st.Prompts()
	for _, tpl := range []prompt.Template{
		{ID: "greet", Text: "You greet ${name} in ${lang}.", RequiredVars: []string{"name"}},
		{ID: "greet", Engine: prompt.Mustache, Text: "You greet {{name}} warmly, in {{lang}}. Secret word: swordfish.", RequiredVars: []string{"name"},
			Metadata: map[string]any{"few_shot": []any{map[string]any{"input": "Greet Bob", "output": "Hello Bob!"}}}},
		{ID: "my-react", Engine: prompt.Go, Text: "You are {{.Role}}. Tools:{{range .Tools}} {{.Name}}{{end}}. Task: {{.Task}}"},
	} {
		if _, err := ps.Put(context.Background(), tpl); err != nil {
			t.Fatal(err)
		}
	}
	return ps
}

func promptAgent(t *testing.T, ps prompt.Store, edit func(*spec.Spec)) (*Agent, error) {
	t.Helper()
	sp, err := spec.Parse("test", []byte(`{"agent_name": "greeter", "version": "v1", "model_name": "scripted:x",
		"prompt_ref": "greet", "input_keys": ["name", "lang"]}`))
	if err != nil {
		t.Fatal(err)
	}
	if edit != nil {
		edit(sp)
	}
	model := scripted.Func(func(context.Context, *llm.Request) (*llm.Response, error) {
		return &llm.Response{Content: "Hello!"}, nil
	})
	opts := []Option{WithProvider(model, "scripted")}
	if ps != nil {
		opts = append(opts, WithPrompts(ps))
	}
	return New(sp, opts...)
}

func TestPromptRef(t *testing.T) {
	ps := promptStore(t)
	input := map[string]any{"name": "Ada", "lang": "Portuguese"}
	off := false
	for _, tc := range []struct {
		name, ref, system, provenance string
		examples                      int
		fewShot                       *bool
	}{
		{"latest", "greet", "You greet Ada warmly, in Portuguese. Secret word: swordfish.", "greet@2", 1, nil},
		{"pinned to v1", "greet@1", "You greet Ada in Portuguese.", "greet@1", 0, nil},
		{"few-shot off", "greet", "You greet Ada warmly, in Portuguese. Secret word: swordfish.", "greet@2", 0, &off},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a, err := promptAgent(t, ps, func(sp *spec.Spec) { sp.PromptRef, sp.FewShotEnabled = tc.ref, tc.fewShot })
			if err != nil {
				t.Fatal(err)
			}
			if got := a.Spec().PromptRef; got != tc.provenance {
				t.Errorf("the agent's prompt_ref is %q, want it pinned to %q", got, tc.provenance)
			}
			res, err := a.Run(context.Background(), input)
			if err != nil {
				t.Fatal(err)
			}
			if res.Messages[0].Content != tc.system || res.PromptTemplate != tc.provenance {
				t.Errorf("system %q, provenance %q", res.Messages[0].Content, res.PromptTemplate)
			}
			if n := len(res.Messages) - 3; n != 2*tc.examples || tc.examples > 0 && res.Messages[1].Content != "Greet Bob" {
				t.Errorf("few-shot turns: %+v", res.Messages)
			}
		})
	}
	// A later put does not change a pinned agent's text.
	a, _ := promptAgent(t, ps, func(sp *spec.Spec) { sp.PromptRef = "greet@1" })
	ps.Put(context.Background(), prompt.Template{ID: "greet", Text: "Changed ${name}."})
	if res, _ := a.Run(context.Background(), input); res.Messages[0].Content != "You greet Ada in Portuguese." {
		t.Errorf("after a third put: %q", res.Messages[0].Content)
	}
}

func TestPromptRefErrors(t *testing.T) {
	ps := promptStore(t)
	for _, tc := range []struct {
		name string
		ps   prompt.Store
		edit func(*spec.Spec)
		want string
	}{
		{"no store", nil, nil, `prompt_ref "greet": no prompt store`},
		{"unknown", ps, func(sp *spec.Spec) { sp.PromptRef = "nope" }, `prompt_ref "nope": prompt: no such template: nope`},
		{"unknown version", ps, func(sp *spec.Spec) { sp.PromptRef = "greet@7" }, "no such template: greet@7"},
		{"blocked by the policy", ps, func(sp *spec.Spec) {
			sp.Policy, _ = policy.Parse([]byte(`{"content_filters": [{"name": "words", "pattern": "swordfish", "on": ["prompt"], "action": "block"}]}`))
		}, "prompt_ref greet@2: the content filter words of the policy blocks the template's text"},
		{"react template not go", ps, func(sp *spec.Spec) { sp.Mode = spec.ModeReAct; sp.ReActTemplate = "greet@1" },
			"react_template greet@1: a ReAct template is rendered with engine go, not"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := promptAgent(t, tc.ps, tc.edit)
			var se *spec.Error
			if !errors.As(err, &se) || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("New = %v, want %q", err, tc.want)
			}
		})
	}
	// A required variable the input lacks is refused when the run starts.
	a, err := promptAgent(t, ps, func(sp *spec.Spec) { sp.InputKeys = nil })
	if err != nil {
		t.Fatal(err)
	}
	_, err = a.Run(context.Background(), map[string]any{"lang": "Portuguese"})
	var ie *InputError
	if !errors.As(err, &ie) || !strings.Contains(err.Error(), "missing variables name") {
		t.Errorf("a run without a required variable: %v", err)
	}
	// A redacting filter changes the text the model gets.
	a, err = promptAgent(t, ps, func(sp *spec.Spec) {
		sp.Policy, _ = policy.Parse([]byte(`{"content_filters": [{"name": "words", "pattern": "swordfish", "on": ["prompt"], "action": "redact"}]}`))
	})
	if err != nil {
		t.Fatal(err)
	}
	if res, _ := a.Run(context.Background(), map[string]any{"name": "Ada", "lang": "en"}); !strings.Contains(res.Messages[0].Content, "[REDACTED:words]") {
		t.Errorf("redacted template: %q", res.Messages[0].Content)
	}
}

// A ReAct agent renders its system prompt from a template of the store.
func TestReActTemplateFromStore(t *testing.T) {
	ps := promptStore(t)
	a, err := promptAgent(t, ps, func(sp *spec.Spec) {
		sp.Mode, sp.PromptRef, sp.ReActTemplate, sp.Description = spec.ModeReAct, "", "my-react@1", "a greeter"
	})
	if err != nil {
		t.Fatal(err)
	}
	s, err := a.NewSession(map[string]any{"name": "Ada", "lang": "en"})
	if err != nil {
		t.Fatal(err)
	}
	if got := s.State().Messages[0].Content; !strings.HasPrefix(got, "You are a greeter. Tools:. Task: ") || !strings.Contains(got, `name = "Ada"`) {
		t.Errorf("the ReAct system prompt: %q", got)
	}
}
