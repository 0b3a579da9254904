// Command adder is the README's Go example: a Go function as a tool, an
// agent spec as a Go literal, and a run whose result and events are
// printed. It runs offline on the scripted model of examples/adder
// (agent.json there is the same agent as JSON):
//
//	go run ./examples/adder
package main

import (
	"context"
	"fmt"
	"log"

	"github.com/agentry/agentry/agent"
	"github.com/agentry/agentry/event"
	_ "github.com/agentry/agentry/llm/scripted" // the offline model; import llm/openai etc. for real ones
	"github.com/agentry/agentry/spec"
	"github.com/agentry/agentry/tool"
)

func main() {
	ctx := context.Background()
	add := tool.Must(tool.Func("add", "Add two integers.",
		func(ctx context.Context, in struct {
			A int `json:"a"`
			B int `json:"b"`
		}) (int, error) {
			return in.A + in.B, nil
		}, tool.WithIdempotency(tool.Safe)))
	a, err := agent.New(&spec.Spec{
		AgentName:   "adder",
		Version:     "v1",
		Mode:        spec.ModeTools,
		SystemText:  "You add numbers with the add tool, then say the sum.",
		PurposeText: "${task}",
		InputKeys:   []string{"task"},
		Limits:      spec.Limits{MaxTurns: 4},
	}, agent.Use(add), agent.WithModel("scripted:examples/adder/model.json")) // or "gpt-4.1-mini", "ollama:qwen3"
	if err != nil {
		log.Fatal(err) // names the field and the problem
	}
	res, err := a.Run(ctx, map[string]any{"task": "add 2 and 3"},
		agent.WithEvents(func(e event.Event) { fmt.Println("event:", e.Type) }))
	// err matches agent.ErrMaxTurns, agent.ErrTimeout, agent.ErrBudgetExceeded,
	// agent.ErrAborted, ...; res is complete either way.
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(res.Result, res.TerminateReason, res.TokenUsage.TotalTokens)
}
