// Command noema is the Noema seed's agent in agentry: a text ReAct agent
// (Thought / Action / Action Input / Final Answer) whose tool reports
// hints (source quality, risks), run within the caller's constraints
// (time, cost, required quality), with a trace id, and whose Result
// carries the full reasoning trace, confidence and decision. Offline:
//
//	go run ./examples/seeds/noema
package main

import (
	"context"
	"fmt"
	"io"
	"log"
	"os"

	"github.com/agentry/agentry/agent"
	"github.com/agentry/agentry/llm/scripted"
	"github.com/agentry/agentry/spec"
	"github.com/agentry/agentry/tool"
)

type lookupIn struct {
	Topic string `json:"topic" jsonschema:"What to look up."`
}

func main() {
	if err := run(os.Stdout); err != nil {
		log.Fatal(err)
	}
}

func run(out io.Writer) error {
	// A tool whose result carries Noema's AgentHints.
	lookup := tool.Must(tool.Func("lookup", "Look a topic up in the course notes.",
		func(_ context.Context, in lookupIn) (map[string]any, error) {
			return map[string]any{"topic": in.Topic, "fact": "Mitochondria make most of a cell's ATP.",
				"agent_hints": map[string]any{"source_quality": "high", "risk_factors": []string{"notes may be out of date"}}}, nil
		}, tool.WithRisk(tool.RiskLow), tool.WithExamples(lookupIn{Topic: "photosynthesis"})))

	// The model, scripted in the ReAct text format.
	model, err := scripted.New("tutor",
		scripted.Turn{Content: "Thought: I should check the notes first.\nAction: lookup\nAction Input: {\"topic\": \"mitochondria\"}"},
		scripted.Turn{Content: "Thought: The notes answer it.\nFinal Answer: {\"answer\": \"They make most of the cell's ATP.\", \"confidence\": 0.9}"})
	if err != nil {
		return err
	}
	a, err := agent.New(&spec.Spec{
		AgentName:   "tutor",
		Version:     "1.0.0",
		Mode:        spec.ModeReAct,
		Description: "a biology tutor",
		PurposeText: "Answer questions about cells for ${student}.",
		UserText:    "${question}",
		InputKeys:   []string{"student", "question"},
		Limits:      spec.Limits{MaxTurns: 5, TimeoutMS: 30_000},
	}, agent.WithProvider(model.Model(), "scripted"), agent.Use(lookup))
	if err != nil {
		return err
	}
	res, err := a.Run(context.Background(), map[string]any{
		"student":  "Ada",
		"question": "What do mitochondria do?",
		// Noema's constraints tighten the run's budgets for this request.
		"constraints": map[string]any{"maxTime": 10_000, "maxCost": 0.05, "requiredQuality": 0.6},
	}, agent.WithUser("ada"), agent.WithTraceContext("4bf92f3577b34da6a3ce929d0e0e4736", ""))
	if err != nil {
		return err
	}
	answer := res.Result.(map[string]any)["answer"]
	fmt.Fprintf(out, "answer: %v\n", answer)
	fmt.Fprintf(out, "steps: %d, tools: %v, source quality: %s, confidence: %.2f\n",
		len(res.Steps), res.ToolsUsed, res.SourceQuality, res.Confidence)
	fmt.Fprintf(out, "first thought: %s\n", res.Steps[0].Thought)
	fmt.Fprintf(out, "decision: %s\n", res.Decision)
	fmt.Fprintf(out, "trace id: %s\n", res.TraceID)
	return nil
}
