package eval

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/agentry/agentry/agent"
	"github.com/agentry/agentry/internal/ids"
	"github.com/agentry/agentry/runlog"
	"github.com/agentry/agentry/store"
)

// Stored reads the report of the evaluation id from st (opts open sealed
// logs).
func Stored(ctx context.Context, st store.Store, id string, opts ...runlog.Option) (*Report, error) {
	run, err := st.Get(ctx, id)
	if err != nil {
		return nil, fmt.Errorf("eval %s: %w", id, err)
	}
	if run.Kind != Kind {
		return nil, fmt.Errorf("%w: %s is a %s run", ErrNotEvaluation, id, run.Kind)
	}
	l, err := runlog.Read(ctx, st, id, opts...)
	if err != nil {
		return nil, fmt.Errorf("eval %s: %w", id, err)
	}
	if l.Result == nil {
		return nil, fmt.Errorf("eval %s: it has no report (it was %s)", id, run.Status)
	}
	var rep Report
	if err := json.Unmarshal(l.Result, &rep); err != nil {
		return nil, fmt.Errorf("eval %s: its report does not read: %w", id, err)
	}
	return &rep, nil
}

// List lists the stored evaluations, newest first (f's Kind is set).
func List(ctx context.Context, st store.Store, f store.Filter) ([]store.Run, error) {
	f.Kind = Kind
	return st.List(ctx, f)
}

// Rescore scores the runs of the stored evaluation id again with d's
// assertions (a dataset changed since), running no agent: the runs'
// Results are read from st. A judge's verdict on the same case and
// output with the same rubric is reused; only a new one asks judge (a
// judge agent's run). The case trials are matched by case name; a case d
// no longer has is left out, and one the evaluation never ran is listed
// in NotRun. The new evaluation is stored, RescoreOf naming the old one.
func Rescore(ctx context.Context, st store.Store, id string, d *Dataset, judge Judge, opts ...runlog.Option) (*Report, error) {
	old, err := Stored(ctx, st, id, opts...)
	if err != nil {
		return nil, err
	}
	known := &verdicts{}
	cases := map[string]*Case{}
	for i := range d.Cases {
		cases[d.Cases[i].Name] = &d.Cases[i]
	}
	rep := &Report{ID: ids.New("eval"), Dataset: d.Name, CreatedAt: time.Now().UTC(), Trials: old.Trials, RescoreOf: old.ID}
	ran := map[string]bool{}
	for _, a := range old.Agents {
		for _, cr := range a.Cases {
			ran[cr.Case] = true
		}
	}
	for _, c := range d.Cases {
		if !ran[c.Name] {
			rep.NotRun = append(rep.NotRun, c.Name)
		}
	}
	for _, a := range old.Agents {
		var trials []trialResult
		for _, cr := range a.Cases {
			c := cases[cr.Case]
			if c == nil {
				continue
			}
			if len(c.Conversation) > 0 {
				tr, err := storedConversation(ctx, st, c, cr, d, known, opts)
				if err != nil {
					return nil, err
				}
				trials = append(trials, tr)
				continue
			}
			res, _, err := storedResult(ctx, st, cr.RunID, opts)
			switch {
			case errors.Is(err, store.ErrNotFound) && cr.Error != "":
				// Refused before it began (a bad input): it fails again.
				res = &agent.Result{ID: cr.RunID, Outcome: agent.OutcomeError, Error: &agent.ErrorInfo{Code: "error", Message: cr.Error}}
			case err != nil:
				return nil, err
			}
			remember(known, cr, c, d, res)
			trials = append(trials, trialResult{c: c, trial: cr.Trial, res: res})
		}
		for i := range trials {
			trials[i].checks = scoreTrial(ctx, d, trials[i], judge, known)
		}
		rep.Agents = append(rep.Agents, summarize(a.Agent, trials))
	}
	rep.compareAgents()
	rep.AgainstBaseline(old) // what the changed assertions changed
	labels := make([]Target, len(rep.Agents))
	for i, a := range rep.Agents {
		labels[i] = Target{Label: a.Agent}
	}
	w, err := begin(ctx, st, rep.ID, d, labels)
	if err != nil {
		return nil, err
	}
	return rep, end(ctx, w, rep)
}

// remember keeps the judge verdicts the old report had on this trial,
// under what they judged, for the rescore to reuse.
func remember(known *verdicts, cr CaseResult, c *Case, d *Dataset, res *agent.Result) {
	var judges []Assertion
	for _, a := range d.Assertions(c) {
		if a.Type == "judge" {
			judges = append(judges, a)
		}
	}
	for _, ck := range cr.Checks {
		if ck.Type != "judge" || ck.Score == nil {
			continue
		}
		for _, a := range judges {
			out, err := field(res.Result, a.Field)
			if err == nil && ck.Rubric == a.Rubric && ck.Judge == a.Agent {
				known.put(verdictKey(a, c, textOf(out)), ck)
			}
		}
	}
}

// storedResult is the Result a stored run ended with.
// storedResult is the Result a stored run ended with, and its input.
func storedResult(ctx context.Context, st store.Store, runID string, opts []runlog.Option) (*agent.Result, map[string]any, error) {
	l, err := runlog.Read(ctx, st, runID, opts...)
	if err != nil {
		return nil, nil, fmt.Errorf("run %s: %w", runID, err)
	}
	var res agent.Result
	if l.Result == nil {
		return nil, nil, fmt.Errorf("run %s has no Result: it did not end", runID)
	}
	if err := json.Unmarshal(l.Result, &res); err != nil {
		return nil, nil, fmt.Errorf("run %s: its Result does not read: %w", runID, err)
	}
	return &res, l.Start.Input, nil
}

// storedConversation is a conversation case's trial as its stored runs
// left it, each turn's judge verdicts kept for the rescore to reuse.
func storedConversation(ctx context.Context, st store.Store, c *Case, cr CaseResult, d *Dataset, known *verdicts, opts []runlog.Option) (trialResult, error) {
	tr := trialResult{c: c, trial: cr.Trial, conversation: cr.Conversation}
	for i, id := range cr.Runs[:min(len(cr.Runs), len(c.Conversation))] {
		res, input, err := storedResult(ctx, st, id, opts)
		if err != nil {
			return tr, err
		}
		tc := c.Conversation[i].asCase(c, input)
		turn := cr
		turn.Checks = nil
		for _, ck := range cr.Checks {
			if ck.Turn == i+1 {
				turn.Checks = append(turn.Checks, ck)
			}
		}
		remember(known, turn, tc, d, res)
		tr.turns = append(tr.turns, turnRun{input: input, res: res})
	}
	tr.res = combined(tr.turns)
	return tr, nil
}

// StoredDataset is the dataset the evaluation id ran, as its log keeps
// it: what a rescore scores with when no other is given.
func StoredDataset(ctx context.Context, st store.Store, id string, opts ...runlog.Option) (*Dataset, error) {
	if _, err := Stored(ctx, st, id, opts...); err != nil {
		return nil, err
	}
	l, err := runlog.Read(ctx, st, id, opts...)
	if err != nil {
		return nil, fmt.Errorf("eval %s: %w", id, err)
	}
	raw, ok := l.Start.Input["dataset"]
	if !ok {
		return nil, fmt.Errorf("eval %s: its log keeps no dataset", id)
	}
	b, err := json.Marshal(raw)
	if err != nil {
		return nil, fmt.Errorf("eval %s: its dataset: %w", id, err)
	}
	return Parse("the dataset of eval "+id, b)
}
