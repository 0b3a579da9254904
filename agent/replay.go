package agent

import (
	"context"
	"encoding/json"
	"fmt"
	"reflect"

	"github.com/agentry/agentry/store"
)

// ReplayReport is what a replay of a stored run found.
type ReplayReport struct {
	RunID string
	// Result is the replay's Result.
	Result *Result
	// Differences are where the replay did something else than the log
	// recorded, in the order found; none when it is identical.
	Differences []Difference
}

// Identical reports whether the replay did what the log recorded.
func (r *ReplayReport) Identical() bool { return len(r.Differences) == 0 }

// LiveTools makes a replay run safe and idempotent tools again and
// compare their results with the recorded ones; non-idempotent tools
// keep their recorded results.
func LiveTools() RunOption { return func(c *runConfig) { c.more().liveTools = true } }

// Replay runs the stored run runID again with a, against its log: every
// model turn is the recorded one (no model is called) and every tool
// result the recorded one (see LiveTools). Nothing is written. It
// reports each step that differs: a model asked something else (the
// spec, the tools or an earlier result changed), a tool that answered
// otherwise, a call the recording lacks, a different ending.
func (a *Agent) Replay(ctx context.Context, st store.Store, runID string, opts ...RunOption) (*ReplayReport, error) {
	l, err := readAgentLog(ctx, st, runID, a.logSeal)
	if err != nil {
		return nil, err
	}
	s, err := a.NewSession(l.Start.Input, append(startedAs(st, l), opts...)...)
	if err != nil {
		return nil, err
	}
	s.cfg.resume = &resumeConfig{log: l, replay: true, liveTools: s.cfg.extra != nil && s.cfg.extra.liveTools}
	s.state.RunID = l.Start.RunID
	res, runErr := s.Run(ctx)
	rep := &ReplayReport{RunID: runID, Result: res}
	if j := s.run.link.journal; j != nil {
		rep.Differences = j.diffs
	} else {
		// The run ended before its log opened (its memory could not be
		// recalled, say): nothing of the recording was played.
		rep.Differences = []Difference{{What: fmt.Sprintf("the replay ended before it began: %v", runErr)}}
	}
	if l.Result != nil {
		var was Result
		if err := json.Unmarshal(l.Result, &was); err != nil {
			return nil, fmt.Errorf("run %s: its Result: %w", runID, err)
		}
		rep.Differences = append(rep.Differences, endingDifferences(&was, res)...)
	}
	return rep, nil
}

// endingDifferences compares how two runs ended.
func endingDifferences(was, now *Result) []Difference {
	var out []Difference
	add := func(what string, a, b any) {
		if !reflect.DeepEqual(a, b) {
			ja, _ := json.Marshal(a)
			jb, _ := json.Marshal(b)
			out = append(out, Difference{Turn: now.Iterations, What: what, Recorded: string(ja), Replayed: string(jb)})
		}
	}
	add("the run ends otherwise", string(was.TerminateReason), string(now.TerminateReason))
	add("the run takes another number of turns", was.Iterations, now.Iterations)
	add("the run makes another number of tool calls", len(was.Steps), len(now.Steps))
	add("the answer differs", jsonValue(was.Result), jsonValue(now.Result))
	return out
}
