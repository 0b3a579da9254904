// Command beans is the beans seed's Agent Core in agentry: agents defined
// in Go and held in a registry, one used by another as a sub-agent,
// structured output returned as a Go value, and the activity events of a
// run in order. Offline:
//
//	go run ./examples/seeds/beans
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
	"github.com/agentry/agentry/llm/scripted"
	"github.com/agentry/agentry/spec"
)

// Summary is the orchestrator's output; its JSON Schema is derived from
// it, and the answer is validated against it.
type Summary struct {
	Title  string   `json:"title"`
	Points []string `json:"points"`
}

func main() {
	if err := run(os.Stdout); err != nil {
		log.Fatal(err)
	}
}

func run(out io.Writer) error {
	ctx := context.Background()
	// A researcher agent, registered by name.
	research, err := scripted.New("researcher", scripted.Turn{Content: "Go 1.26 adds a faster GC and new iterators."})
	if err != nil {
		return err
	}
	researcher, err := agent.New(&spec.Spec{AgentName: "researcher", Version: "v1", Description: "Finds facts.",
		SystemText: "You find facts."}, agent.WithProvider(research.Model(), "scripted"))
	if err != nil {
		return err
	}
	agents := agent.NewRegistry()
	if err := agents.Register(researcher); err != nil {
		return err
	}

	// The orchestrator calls it as a tool, then answers in the shape of
	// Summary (one wrong answer first: it is sent back and corrected).
	orchestrate, err := scripted.New("writer",
		scripted.Turn{ToolCalls: []scripted.ToolCall{{Name: "researcher", Arguments: map[string]any{"task": "What is new in Go 1.26?"}}}},
		scripted.Turn{Content: `{"title": "Go 1.26"}`},
		scripted.Turn{Content: `{"title": "Go 1.26", "points": ["faster GC", "new iterators"]}`})
	if err != nil {
		return err
	}
	writer, err := agent.New(&spec.Spec{AgentName: "writer", Version: "v1", SystemText: "You write short summaries.",
		Tools: []string{"agent:researcher"}, Limits: spec.Limits{MaxTurns: 5}},
		agent.WithProvider(orchestrate.Model(), "scripted"), agent.WithRegistry(agents), agent.WithOutput[Summary]())
	if err != nil {
		return err
	}
	if err := agents.Register(writer); err != nil {
		return err
	}

	var activity []string
	summary, res, err := agent.RunAs[Summary](ctx, writer, map[string]any{"task": "Summarise Go 1.26"},
		agent.WithEvents(func(e event.Event) {
			if e.Type == event.ToolCallStart || e.Type == event.TurnStart || e.Type == event.RunEnd {
				activity = append(activity, e.AgentName+":"+string(e.Type))
			}
		}))
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "title: %s\npoints: %s\n", summary.Title, strings.Join(summary.Points, "; "))
	fmt.Fprintf(out, "turns: %d, validated: %v, model calls: %d (the sub-agent's included)\n", res.Iterations, *res.Validated, len(res.ModelCalls))
	fmt.Fprintf(out, "activity: %s\n", strings.Join(activity, " "))
	a, _ := agents.Get("writer")
	fmt.Fprintf(out, "registered: %d agents, writer is %s\n", len(agents.Agents()), a.Spec().Version)
	return nil
}
