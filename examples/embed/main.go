// Command embed shows agentry as a library, without JSON: a Go function
// as a tool, an agent spec as a Go literal, a model scripted in Go, a
// service with an event subscriber, and a run whose result is printed.
// It runs offline:
//
//	go run ./examples/embed
//
// To run it for real, replace the WithProvider option by a model name
// in the spec (ModelName: "gpt-4.1-mini") and import a provider package
// (github.com/agentry/agentry/llm/openai).
package main

import (
	"context"
	"fmt"
	"io"
	"log"
	"os"
	"strings"

	"github.com/agentry/agentry/agent"
	"github.com/agentry/agentry/event"
	"github.com/agentry/agentry/llm"
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
	if err := run(os.Stdout); err != nil {
		log.Fatal(err)
	}
}

// run builds the agent, runs it and prints what it did to out.
func run(out io.Writer) error {
	// The schema derived from weatherIn, with what a Go type cannot say:
	// the values units may take.
	params, err := tool.SchemaFor[weatherIn]()
	if err != nil {
		return err
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

	// The agent, as a Go literal: the same fields as its JSON form.
	sp := &spec.Spec{
		AgentName:  "forecaster",
		Version:    "v1",
		SystemText: "You compare the weather of cities.",
		UserText:   "Which is warmer, ${a} or ${b}?",
		InputKeys:  []string{"a", "b"},
		Limits:     spec.Limits{MaxTurns: 4, MaxToolCalls: 4},
	}

	// The model, scripted: two weather calls in parallel, then an answer.
	script, err := scripted.New("forecaster",
		scripted.Turn{ToolCalls: []scripted.ToolCall{
			{Name: "weather", Arguments: weatherIn{City: "Oslo"}},
			{Name: "weather", Arguments: weatherIn{City: "Lisbon"}}},
			Usage: &llm.Usage{PromptTokens: 120, CompletionTokens: 30}},
		scripted.Turn{Content: "Lisbon is warmer: 19°C against 3°C in Oslo.",
			Usage: &llm.Usage{PromptTokens: 210, CompletionTokens: 14}})
	if err != nil {
		return err
	}
	a, err := agent.New(sp, agent.Use(weather), agent.WithProvider(script.Model(), "scripted"))
	if err != nil {
		return err
	}

	svc := agent.NewService()
	defer svc.Stop(context.Background())
	stop := svc.Subscribe(func(e event.Event) {
		if e.Type == event.ToolCallEnd {
			fmt.Fprintf(out, "  %s(%s) -> %s in %.2fms\n", e.Tool.Name, e.Tool.Arguments, e.Tool.Status, e.Tool.DurationMS)
		}
	})
	defer stop()

	res, err := svc.RunOnce(context.Background(), a, map[string]any{"a": "Oslo", "b": "Lisbon"})
	if err != nil {
		return err
	}
	svc.Events().Flush() // the subscriber runs on its own goroutine: let it print every event first
	fmt.Fprintln(out, res.Result)
	fmt.Fprintf(out, "%d turns, %d tokens, confidence %.2f\n", res.Iterations, res.TokenUsage.TotalTokens, res.Confidence)
	return nil
}
