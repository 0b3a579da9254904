package main

import (
	"fmt"
	"io"
	"strings"

	"github.com/agentry/agentry/agent"
	"github.com/agentry/agentry/event"
)

// progress prints a run's events to stderr as they happen.
type progress struct {
	w         io.Writer
	streaming bool // inside a run of content_chunk text
	streamed  bool // this turn's text was streamed already
}

func newProgress(w io.Writer) *progress { return &progress{w: w} }

func (p *progress) handle(e event.Event) {
	indent := ""
	if e.ParentRunID != "" {
		indent = "    "
	}
	if e.Type != event.ContentChunk && p.streaming {
		fmt.Fprintln(p.w)
		p.streaming = false
	}
	switch e.Type {
	case event.RunStart:
		if pl, ok := e.Data["pipeline"]; ok {
			fmt.Fprintf(p.w, "▶ pipeline %v@%v from stage %v\n", pl, e.Data["version"], e.Data["stage"])
			return
		}
		fmt.Fprintf(p.w, "%s▶ %s@%v  model %v (%v)  run %s\n", indent, e.AgentName, e.Data["agent_version"], e.Data["model"], e.Data["provider"], e.RunID)
	case event.TurnStart:
		p.streamed = false
		fmt.Fprintf(p.w, "%sturn %d\n", indent, e.Turn)
	case event.ContentChunk:
		if !p.streaming {
			fmt.Fprint(p.w, indent+"  ")
			p.streaming, p.streamed = true, true
		}
		fmt.Fprint(p.w, strings.ReplaceAll(e.Content, "\n", "\n"+indent+"  "))
	case event.Thinking:
		if !p.streamed {
			fmt.Fprintf(p.w, "%s  thinking: %s\n", indent, oneLine(e.Content, 200))
		}
	case event.ToolCallStart:
		fmt.Fprintf(p.w, "%s  → %s %s\n", indent, e.Tool.Name, oneLine(string(e.Tool.Arguments), 200))
	case event.ToolCallEnd:
		switch e.Tool.Status {
		case "success":
			fmt.Fprintf(p.w, "%s  ← %s ok in %.1fms: %s\n", indent, e.Tool.Name, e.Tool.DurationMS, oneLine(string(e.Tool.Output), 200))
		case "awaiting_approval":
			fmt.Fprintf(p.w, "%s  ⏸ %s waits for approval: %s\n", indent, e.Tool.Name, oneLine(e.Tool.Error, 200))
		default:
			fmt.Fprintf(p.w, "%s  ← %s failed in %.1fms: %s\n", indent, e.Tool.Name, e.Tool.DurationMS, oneLine(e.Tool.Error, 200))
		}
	case event.Retry:
		fmt.Fprintf(p.w, "%s  ↻ model call failed (attempt %d), retrying in %dms: %s\n", indent, e.Attempt, e.WaitMS, e.Error.Message)
	case event.Error:
		fmt.Fprintf(p.w, "%s  ✗ %s\n", indent, e.Error.Message)
	case event.AgentStarted:
		fmt.Fprintf(p.w, "■ stage %v (hop %v): %v\n", e.Data["stage"], e.Data["hop"], e.Data["agent"])
	case event.AgentCompleted:
		line := fmt.Sprintf("■ %v: %v in %.1fms", e.Data["stage"], e.Data["status"], e.Data["duration_ms"])
		if next, _ := e.Data["next"].(string); next != "" {
			line += " → " + next
		}
		if msg, _ := e.Data["error"].(string); msg != "" {
			line += ": " + msg
		}
		fmt.Fprintln(p.w, line)
	case event.RunEnd:
		p.end(e, indent)
	}
}

func (p *progress) end(e event.Event, indent string) {
	unit := "turn"
	if _, ok := e.Data["hops"]; ok {
		unit = "stage"
	}
	if e.Turn != 1 {
		unit += "s"
	}
	cost := "cost unknown (unpriced model)"
	if c, ok := e.Data["cost_usd"].(float64); ok {
		cost = fmt.Sprintf("$%.6f", c)
	}
	q, _ := e.Data["question"].(string)
	// A pause is not a failure: it has its own mark and words, and what
	// to type next follows the answer.
	mark, what := "✓", fmt.Sprint(e.Data["terminate_reason"])
	switch ok, _ := e.Data["success"].(bool); {
	case what == string(agent.ReasonAwaitingApproval):
		mark, what = "⏸", "waits for approval"
	case q != "":
		mark, what = "⏸", "waits for the user"
	case !ok:
		mark = "✗"
	}
	fmt.Fprintf(p.w, "%s%s %s: %s after %d %s, %v tokens, %s, %.1fms\n", indent, mark, e.AgentName,
		what, e.Turn, unit, e.Data["total_tokens"], cost, e.Data["duration_ms"])
	if q != "" {
		fmt.Fprintf(p.w, "%s  waiting at stage %v: %s\n", indent, e.Data["stage"], q)
	}
	if e.Error != nil && mark != "⏸" {
		fmt.Fprintf(p.w, "%s  %s: %s\n", indent, e.Error.Code, e.Error.Message)
	}
}
