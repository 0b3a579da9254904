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

func Example() {
	// A tool from a typed Go function: its JSON schema comes from addIn.
	add := tool.Must(tool.Func("add", "Add two integers.",
		func(_ context.Context, in addIn) (int, error) { return in.A + in.B, nil },
		tool.WithIdempotency(tool.Safe)))
	tools, _ := tool.NewRegistry(add)

	// The offline model: it asks for add(2, 3), then answers.
	script, _ := scripted.Parse("example", []byte(`{"turns": [
		{"tool_calls": [{"name": "add", "arguments": {"a": 2, "b": 3}}]},
		{"content": "2 + 3 = 5"}]}`))

	sp, _ := spec.Parse("example", []byte(`{
		"agent_name": "adder", "version": "v1", "model_name": "scripted:example",
		"system_text": "You add numbers for ${user}.", "input_keys": ["user"],
		"tools": ["add"], "limits": {"max_turns": 4}}`))
	a, err := agent.New(sp, agent.WithProvider(script.Model(), "scripted"), agent.WithTools(tools))
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
