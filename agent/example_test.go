package agent_test

import (
	"context"
	"fmt"

	"github.com/agentry/agentry/agent"
	"github.com/agentry/agentry/event"
	"github.com/agentry/agentry/llm/scripted"
	"github.com/agentry/agentry/spec"
	"github.com/agentry/agentry/tool"
)

type addIn struct {
	A int `json:"a" jsonschema:"First addend."`
	B int `json:"b" jsonschema:"Second addend."`
}

// An agent built in Go: a spec literal, a tool from a typed function,
// an offline model scripted in Go. No JSON, no model name.
func Example() {
	add := tool.Must(tool.Func("add", "Add two integers.",
		func(_ context.Context, in addIn) (int, error) { return in.A + in.B, nil },
		tool.WithIdempotency(tool.Safe)))

	// The offline model: it asks for add(2, 3), then answers.
	script, _ := scripted.New("example",
		scripted.Turn{ToolCalls: []scripted.ToolCall{{Name: "add", Arguments: addIn{A: 2, B: 3}}}},
		scripted.Turn{Content: "2 + 3 = 5"})

	a, err := agent.New(&spec.Spec{
		AgentName:  "adder",
		Version:    "v1",
		SystemText: "You add numbers for ${user}.",
		InputKeys:  []string{"user"},
		Limits:     spec.Limits{MaxTurns: 4},
	}, agent.WithProvider(script.Model(), "scripted"), agent.Use(add))
	if err != nil {
		fmt.Println(err)
		return
	}
	res, err := a.Run(context.Background(), map[string]any{"user": "Ada"})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(res.Result)
	fmt.Println(res.TerminateReason, res.Iterations, res.ToolsUsed, res.Steps[0].Observation)
	// Output:
	// 2 + 3 = 5
	// completed 2 [add] 5
}

// The same agent as JSON, its tools named in the spec and looked up in a
// registry (as the binary gives its built-in tools).
func ExampleFromFile() {
	add := tool.Must(tool.Func("add", "Add two integers.",
		func(_ context.Context, in addIn) (int, error) { return in.A + in.B, nil },
		tool.WithIdempotency(tool.Safe)))
	tools, _ := tool.NewRegistry(add)
	a, err := agent.FromFile("../examples/adder/agent.json", agent.WithTools(tools))
	if err != nil {
		fmt.Println(err)
		return
	}
	res, err := a.Run(context.Background(), map[string]any{"task": "add 2 and 3"})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(res.Result, res.ToolsUsed)
	// Output:
	// 2 + 3 = 5 [add]
}

func ExampleService() {
	script, _ := scripted.Parse("s", []byte(`{"turns": [{"content": "hello"}]}`))
	sp, _ := spec.Parse("s", []byte(`{"agent_name": "greeter", "version": "v1", "model_name": "scripted:s"}`))
	a, _ := agent.New(sp, agent.WithProvider(script.Model(), "scripted"))

	svc := agent.NewService()
	defer svc.Stop(context.Background())
	stop := svc.Subscribe(func(e event.Event) {
		if e.Type == event.RunEnd {
			fmt.Println("event:", e.Type, e.AgentName, e.Data["terminate_reason"])
		}
	})
	defer stop()

	res, err := svc.RunOnce(context.Background(), a, nil)
	svc.Events().Flush() // a service's subscribers run on their own goroutines
	fmt.Println(res.Result, err)
	// Output:
	// event: run_end greeter completed
	// hello <nil>
}

func ExampleSession_Abort() {
	script, _ := scripted.Parse("s", []byte(`{"turns": [{"content": "never", "delay_ms": 60000}]}`))
	sp, _ := spec.Parse("s", []byte(`{"agent_name": "slow", "version": "v1", "model_name": "scripted:s"}`))
	a, _ := agent.New(sp, agent.WithProvider(script.Model(), "scripted"))

	var sess *agent.Session
	sess, _ = a.NewSession(nil, agent.WithEvents(func(e event.Event) {
		if e.Type == event.TurnStart {
			sess.Abort()
		}
	}))
	res, err := sess.Run(context.Background())
	fmt.Println(res.TerminateReason, res.Outcome, err)
	// Output:
	// aborted partial run aborted
}

// Agents a program holds, found by name: a registry lets an agent built
// in Go serve as another's sub-agent ("agent:NAME").
func ExampleRegistry() {
	translator, _ := scripted.New("translator", scripted.Turn{Content: "Bonjour"})
	fr, _ := agent.New(&spec.Spec{AgentName: "french", Version: "v1", Description: "Translates into French.",
		SystemText: "Translate into French."}, agent.WithProvider(translator.Model(), "scripted"))

	agents := agent.NewRegistry()
	if err := agents.Register(fr); err != nil {
		fmt.Println(err)
		return
	}

	boss, _ := scripted.New("boss",
		scripted.Turn{ToolCalls: []scripted.ToolCall{{Name: "french", Arguments: map[string]any{"task": "Hello"}}}},
		scripted.Turn{Content: "In French: Bonjour"})
	a, err := agent.New(&spec.Spec{AgentName: "greeter", Version: "v1", SystemText: "Greet in French.", Tools: []string{"agent:french"}},
		agent.WithProvider(boss.Model(), "scripted"), agent.WithRegistry(agents))
	if err != nil {
		fmt.Println(err)
		return
	}
	res, _ := a.Run(context.Background(), nil)
	got, _ := agents.Get("french@v1")
	fmt.Println(res.Result, res.Steps[0].Observation, got.Name())
	// Output: In French: Bonjour "Bonjour" french
}

// The Agent Stack as parts: the prompt of a structured agent for one
// input, composed for a model client of the caller's own, and the
// client's raw reply parsed and validated (the seed's AgentFactory and
// AgentPrompt).
func ExampleAgent_Prompt() {
	unused, _ := scripted.New("unused") // the caller calls its own model
	a, err := agent.New(&spec.Spec{AgentName: "A2", Version: "v1", Mode: spec.ModeChooser,
		SystemText: "You label requests.", PurposeText: "Pick the tone of ${text}.", InputKeys: []string{"text"},
		OutputSchema: []byte(`{"type": "object", "required": ["tone"], "properties": {"tone": {"type": "string", "enum": ["direct", "formal"]}}}`),
		Enums:        map[string][]string{"tone": {"direct", "formal"}}}, agent.WithProvider(unused.Model(), "scripted"))
	if err != nil {
		fmt.Println(err)
		return
	}
	p, err := a.Prompt(map[string]any{"text": "Dear team"})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(len(p.Messages), p.Messages[0].Role, p.Messages[1].Role, len(p.ResponseFormat) > 0)

	raw := "```json\n{\"tone\": \"formal\"}\n```" // what the caller's client got back
	out, err := p.ParseAndValidate(raw)
	fmt.Println(out["tone"], err)

	_, err = a.Prompt(map[string]any{})
	fmt.Println(err)
	// Output:
	// 2 system user true
	// formal <nil>
	// input for agent A2: missing input key "text"; purpose_text uses ${text} but the input has no "text"
}
