// Command embed shows agentry as a library: a Go function as a tool, an
// agent spec built in code, a service with an event subscriber, and a run
// whose result is printed. It runs offline on a scripted model:
//
//	go run ./examples/embed
//
// Replace the WithProvider option by a real model name in the spec
// ("model_name": "gpt-4.1-mini") and import a provider package to run it
// for real.
package main

import (
	"context"
	"fmt"
	"log"
	"strings"

	"github.com/agentry/agentry/agent"
	"github.com/agentry/agentry/event"
	"github.com/agentry/agentry/llm/scripted"
	"github.com/agentry/agentry/spec"
	"github.com/agentry/agentry/tool"
)

// weatherIn is the tool's input; its JSON schema is derived from it.
type weatherIn struct {
	City  string `json:"city" jsonschema:"City name."`
	Units string `json:"units,omitempty" jsonschema:"metric (the default) or imperial."`
}

type weatherOut struct {
	City    string  `json:"city"`
	TempC   float64 `json:"temp_c"`
	Summary string  `json:"summary"`
}

func main() {
	// The schema derived from weatherIn, with what a Go type cannot say:
	// the values units may take.
	params, err := tool.SchemaFor[weatherIn]()
	if err != nil {
		log.Fatal(err)
	}
	params.Properties["units"].Enum = []any{"metric", "imperial"}
	weather := tool.Must(tool.Func("weather", "Current weather in a city.",
		func(_ context.Context, in weatherIn) (weatherOut, error) {
			temps := map[string]float64{"oslo": 3, "lisbon": 19}
			t, ok := temps[strings.ToLower(in.City)]
			if !ok {
				return weatherOut{}, tool.NotFound("city", in.City)
			}
			return weatherOut{City: in.City, TempC: t, Summary: "clear"}, nil
		}, tool.WithIdempotency(tool.Safe), tool.WithSchema(params)))
	tools, err := tool.NewRegistry(weather)
	if err != nil {
		log.Fatal(err)
	}

	sp, err := spec.Parse("embedded", []byte(`{
		"agent_name": "forecaster", "version": "v1",
		"model_name": "gpt-4.1-mini",
		"system_text": "You compare the weather of cities.",
		"user_text": "Which is warmer, ${a} or ${b}?",
		"input_keys": ["a", "b"],
		"tools": ["weather"],
		"limits": {"max_turns": 4, "max_tool_calls": 4}}`))
	if err != nil {
		log.Fatal(err)
	}

	// The model, scripted: two weather calls in parallel, then an answer.
	script, err := scripted.Parse("forecaster", []byte(`{"model": "gpt-4.1-mini", "turns": [
		{"tool_calls": [{"name": "weather", "arguments": {"city": "Oslo"}}, {"name": "weather", "arguments": {"city": "Lisbon"}}],
		 "usage": {"prompt_tokens": 120, "completion_tokens": 30}},
		{"content": "Lisbon is warmer: 19°C against 3°C in Oslo.", "usage": {"prompt_tokens": 210, "completion_tokens": 14}}]}`))
	if err != nil {
		log.Fatal(err)
	}
	a, err := agent.New(sp, agent.WithTools(tools), agent.WithProvider(script.Model(), "scripted"))
	if err != nil {
		log.Fatal(err)
	}

	svc := agent.NewService()
	defer svc.Stop(context.Background())
	stop := svc.Subscribe(func(e event.Event) {
		if e.Type == event.ToolCallEnd {
			fmt.Printf("  %s(%s) -> %s in %.2fms\n", e.Tool.Name, e.Tool.Arguments, e.Tool.Status, e.Tool.DurationMS)
		}
	})
	defer stop()

	res, err := svc.RunOnce(context.Background(), a, map[string]any{"a": "Oslo", "b": "Lisbon"})
	if err != nil {
		log.Fatal(err)
	}
	svc.Events().Flush() // the subscriber runs on its own goroutine: let it print every event first
	fmt.Println(res.Result)
	fmt.Printf("%d turns, %d tokens, $%.6f, confidence %.2f\n", res.Iterations, res.TokenUsage.TotalTokens, *res.EstimatedCost, res.Confidence)
}
