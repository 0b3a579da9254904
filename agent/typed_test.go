package agent

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/agentry/agentry/internal/testdb"
	"github.com/agentry/agentry/llm"
	"github.com/agentry/agentry/llm/scripted"
	"github.com/agentry/agentry/spec"
)

type tripPlan struct {
	City string `json:"city"`
	Days int    `json:"days"`
}

// TestRunAs: an agent given an output type gets its schema, validates
// and corrects its answer as any schema's, and RunAs returns the answer
// as the Go value.
func TestRunAs(t *testing.T) {
	s, _ := scripted.New("plan",
		scripted.Turn{Content: `{"city": "Lisbon"}`}, // days missing: sent back
		scripted.Turn{Content: `{"city": "Lisbon", "days": 3}`})
	a, err := New(&spec.Spec{AgentName: "planner", Version: "v1", SystemText: "Plan."},
		WithProvider(s.Model(), "scripted"), WithOutput[tripPlan]())
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(a.Spec().OutputSchema), `"days"`) {
		t.Errorf("output schema %s", a.Spec().OutputSchema)
	}
	plan, res, err := RunAs[tripPlan](context.Background(), a, nil)
	if err != nil || plan != (tripPlan{City: "Lisbon", Days: 3}) || res.Iterations != 2 || res.Validated == nil || !*res.Validated {
		t.Fatalf("%v: %+v, %+v", err, plan, res)
	}
	// A text answer is a string T; an answer that is not a T says so.
	s2, _ := scripted.New("text", scripted.Turn{Content: "hello"}, scripted.Turn{Content: "hello"})
	b, _ := New(&spec.Spec{AgentName: "t", Version: "v1", SystemText: "Say hello."}, WithProvider(s2.Model(), "scripted"))
	if text, _, err := RunAs[string](context.Background(), b, nil); err != nil || text != "hello" {
		t.Errorf("a string: %q, %v", text, err)
	}
	var oe *OutputError
	if _, res, err := RunAs[tripPlan](context.Background(), b, nil); !errors.As(err, &oe) || res == nil || !strings.Contains(err.Error(), "tripPlan") {
		t.Errorf("text as a struct: %v", err)
	}
	if _, err := New(&spec.Spec{AgentName: "n", Version: "v1"}, WithProvider(s.Model(), "scripted"), WithOutput[int]()); err == nil {
		t.Error("WithOutput of a non-struct was accepted")
	}
}

// TestAgentIsImmutable: changing a spec after New, or the copy an agent
// hands out, changes no later run.
func TestAgentIsImmutable(t *testing.T) {
	sp := &spec.Spec{AgentName: "c", Version: "v1", Mode: spec.ModeChooser, SystemText: "Choose.", PurposeText: "Pick a tone.",
		OutputSchema: []byte(`{"type": "object", "properties": {"tone": {"type": "string", "enum": ["a", "b"]}}}`),
		Enums:        map[string][]string{"tone": {"a", "b"}}, Defaults: map[string]any{"tone": "a"}}
	m := &recorder{replies: []reply{answer(`{}`), answer(`{}`)}}
	a, err := New(sp, WithProvider(m, "test"))
	if err != nil {
		t.Fatal(err)
	}
	sp.Defaults["tone"] = "b"
	sp.Enums["tone"][0] = "z"
	sp.OutputSchema[len(sp.OutputSchema)-2] = ' '
	got := a.Spec()
	got.Defaults["tone"] = "b"
	got.Enums["tone"] = nil
	res, err := a.Run(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	if out, _ := res.Result.(map[string]any); out["tone"] != "a" {
		t.Errorf("the default changed under the agent: %v", res.Result)
	}
	if a.Spec().Enums["tone"][0] != "a" {
		t.Errorf("the enums changed under the agent: %v", a.Spec().Enums)
	}
	// Nor does editing a prompt it made.
	p, err := a.Prompt(nil)
	if err != nil {
		t.Fatal(err)
	}
	clear(p.ResponseFormat)
	if q, _ := a.Prompt(nil); !json.Valid(q.ResponseFormat) || !json.Valid(a.Spec().OutputSchema) {
		t.Errorf("the response format changed under the agent: %q", q.ResponseFormat)
	}
	// Nor editing the images of the history a prompt or a Result holds.
	withImage := &spec.Spec{AgentName: "v", Version: "v1", Mode: spec.ModeWriter, SystemText: "Describe.", PurposeText: "Describe it.",
		OutputSchema: []byte(`{"type": "object"}`), Messages: []llm.Message{{Role: llm.RoleUser, Content: "Look.",
			Media: &llm.Media{Images: []llm.Image{{URL: "https://example.com/a.png"}}}}}}
	b, err := New(withImage, WithProvider(&recorder{replies: []reply{answer(`{}`)}}, "test"))
	if err != nil {
		t.Fatal(err)
	}
	bp, _ := b.Prompt(nil)
	for _, m := range bp.Messages {
		if m.Media != nil {
			m.Media.Images[0].URL = "https://evil.example/"
		}
	}
	res, _ = b.Run(context.Background(), nil)
	for _, m := range res.Messages {
		if m.Media != nil {
			m.Media.Images[0].URL = "https://evil.example/"
		}
	}
	if got := b.Spec().Messages[0].Media.Images[0].URL; got != "https://example.com/a.png" {
		t.Errorf("the agent's image is now %q", got)
	}
	if q, _ := b.Prompt(nil); q.Messages[1].Media.Images[0].URL != "https://example.com/a.png" {
		t.Errorf("a later prompt's image is %+v", q.Messages[1].Media)
	}
}

// TestInitialMessages: a spec's messages are the conversation the agent
// starts from, in every mode, after the system prompt and before the task.
func TestInitialMessages(t *testing.T) {
	history := `"messages": [{"role": "user", "content": "I am ${who}."}, {"role": "assistant", "content": "Hello."}]`
	for _, mode := range []string{"tools", "react", "writer"} {
		t.Run(mode, func(t *testing.T) {
			extra := ""
			last := "done"
			switch mode {
			case "react":
				last = "Thought: ok.\nFinal Answer: done"
			case "writer":
				extra = `, "purpose_text": "Write.", "output_schema": {"type": "object"}`
				last = "{}"
			}
			m := &recorder{replies: []reply{answer(last)}}
			a := newTestAgent(t, `{"agent_name": "h", "version": "v1", "model_name": "m", "mode": "`+mode+`", "system_text": "S.",
				"input_keys": ["who"], `+history+extra+`}`, m)
			if _, err := a.Run(context.Background(), map[string]any{"who": "Ada"}); err != nil {
				t.Fatal(err)
			}
			msgs := m.reqs[0].Messages
			i := 0
			for i < len(msgs) && msgs[i].Role == llm.RoleSystem {
				i++
			}
			if i == 0 || len(msgs) < i+3 || msgs[i].Content != "I am Ada." || msgs[i+1].Role != llm.RoleAssistant || msgs[i+1].Content != "Hello." {
				t.Errorf("messages %+v", msgs)
			}
		})
	}
	if _, err := spec.Parse("x", []byte(`{"agent_name": "h", "version": "v1", "messages": [{"role": "system", "content": "x"}, {"role": "user", "content": "${nope}"}], "input_keys": ["who"]}`)); err == nil ||
		!strings.Contains(err.Error(), `messages[0].role "system"`) || !strings.Contains(err.Error(), "messages[1] uses ${nope}") {
		t.Errorf("bad initial messages: %v", err)
	}
}

func TestPromptOnlyForStructuredModes(t *testing.T) {
	a := newTestAgent(t, `{"agent_name": "t", "version": "v1", "model_name": "m"}`, &recorder{})
	if _, err := a.Prompt(nil); !errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), "mode tools") {
		t.Errorf("Prompt of a tools agent: %v", err)
	}
}

// TestWithImages: a run's images ride on its task message to the model,
// and a replay of the stored run sends the same.
func TestWithImages(t *testing.T) {
	ctx := context.Background()
	img := llm.Image{Data: []byte{0x89, 'P', 'N', 'G'}, MIMEType: "image/png"}
	m := &recorder{replies: []reply{answer("a cat")}}
	a := newTestAgent(t, `{"agent_name": "v", "version": "v1", "model_name": "m", "system_text": "Describe."}`, m)
	st := openStore(t, testdb.SQLite(t))
	res, err := a.Run(ctx, map[string]any{"task": "What is this?"}, WithImages(img, llm.Image{URL: "https://x.dev/b.jpg"}), WithStore(st))
	if err != nil {
		t.Fatal(err)
	}
	msgs := m.reqs[0].Messages
	last := msgs[len(msgs)-1]
	if last.Role != llm.RoleUser || len(last.Images()) != 2 || last.Images()[1].URL != "https://x.dev/b.jpg" {
		t.Errorf("the task message %+v", last)
	}
	if rep, err := a.Replay(ctx, st, res.ID); err != nil || !rep.Identical() {
		t.Errorf("replay: %v %+v", err, rep)
	}
	if _, err := a.NewSession(nil, WithImages(llm.Image{Data: []byte("x"), MIMEType: "text/plain"})); !errors.Is(err, ErrConfig) {
		t.Errorf("bytes that are no image: %v", err)
	}
}
