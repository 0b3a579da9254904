package eval

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/agentry/agentry/agent"
	"github.com/agentry/agentry/internal/ids"
	"github.com/agentry/agentry/internal/journal"
	"github.com/agentry/agentry/policy"
	"github.com/agentry/agentry/runlog"
	"github.com/agentry/agentry/store"
)

// Target is an agent an evaluation runs, under the name its report
// gives it (NAME@VERSION, and the model when another one is used).
type Target struct {
	Label string
	Agent *agent.Agent
	// PerRun, when set, gives each run options of its own: the command
	// line gives a scripted model's runs each a fresh copy of the script,
	// so that each plays it from its first turn, as agentry run does.
	PerRun func() ([]agent.RunOption, error)
}

// Options say how an evaluation runs.
type Options struct {
	// Store keeps the evaluation and its runs (required): it is what a
	// later rescore, list or comparison reads.
	Store store.Store
	// Trials runs each case this many times (default 1): a model that is
	// not deterministic gets a pass rate and pass@k.
	Trials int
	// Concurrency is how many runs go at once (default 1).
	Concurrency int
	// Judge scores judge assertions; nil fails them.
	Judge Judge
	// Progress is told after each run, with how many of total are done.
	Progress func(done, total int)
	// RunOptions are given to every run of the evaluation.
	RunOptions []agent.RunOption
	// Baseline, an earlier evaluation, is compared with (Report.Baseline)
	// before the report is stored.
	Baseline *Report
}

// Run runs every case of d Options.Trials times for each target, each run
// an ordinary stored run whose parent is the evaluation, checks their
// assertions, and stores the evaluation with its report. The report is
// returned even when some runs failed: a failed run is a failed case.
func Run(ctx context.Context, d *Dataset, targets []Target, o Options) (*Report, error) {
	if o.Store == nil {
		return nil, ErrNoStore
	}
	if len(targets) == 0 {
		return nil, errors.New("eval: no agent to evaluate")
	}
	for i, t := range targets {
		if slices.ContainsFunc(targets[:i], func(o Target) bool { return o.Label == t.Label }) {
			return nil, fmt.Errorf("eval: two agents are labelled %q: a report could not tell them apart", t.Label)
		}
	}
	o.Trials, o.Concurrency = max(o.Trials, 1), max(o.Concurrency, 1)
	id := ids.New("eval")
	w, err := begin(ctx, o.Store, id, d, targets)
	if err != nil {
		return nil, err
	}
	rep := &Report{ID: id, Dataset: d.Name, CreatedAt: time.Now().UTC(), Trials: o.Trials}
	results := make([][]trialResult, len(targets))
	var wg sync.WaitGroup
	slots := make(chan struct{}, o.Concurrency) // taken before a run's goroutine starts: at most Concurrency of them
	var mu sync.Mutex
	done, total := 0, len(targets)*len(d.Cases)*o.Trials
	known := &verdicts{}
	for ti, t := range targets {
		results[ti] = make([]trialResult, len(d.Cases)*o.Trials)
		for ci := range d.Cases {
			for trial := 1; trial <= o.Trials; trial++ {
				slot := ci*o.Trials + trial - 1
				took := false
				select {
				case slots <- struct{}{}:
					took = true
				case <-ctx.Done():
				}
				if ctx.Err() != nil { // cancelled: what has not begun does not
					if took {
						<-slots
					}
					results[ti][slot] = notRun(&d.Cases[ci], trial, ctx.Err())
					continue
				}
				wg.Go(func() {
					defer func() { <-slots }()
					r := runCase(ctx, id, t, d, &d.Cases[ci], trial, o)
					r.checks = scoreTrial(ctx, d, r, o.Judge, known)
					mu.Lock()
					results[ti][slot] = r
					done++
					if o.Progress != nil {
						o.Progress(done, total)
					}
					mu.Unlock()
				})
			}
		}
	}
	wg.Wait()
	for ti, t := range targets {
		rep.Agents = append(rep.Agents, summarize(t.Label, results[ti]))
	}
	rep.compareAgents()
	if o.Baseline != nil {
		rep.AgainstBaseline(o.Baseline)
	}
	if err := end(ctx, w, rep); err != nil {
		return rep, err
	}
	return rep, ctx.Err()
}

// trialResult is one run of a case.
type trialResult struct {
	c      *Case
	trial  int
	res    *agent.Result // a conversation's: its turns' figures together
	checks []Check
	// conversation and turns are a conversation case's.
	conversation string
	turns        []turnRun
}

// runCase runs one trial of c: a stored run, child of the evaluation.
func runCase(ctx context.Context, evalID string, t Target, d *Dataset, c *Case, trial int, o Options) trialResult {
	opts := append([]agent.RunOption{agent.WithStore(o.Store), agent.WithParentRunID(evalID),
		agent.WithMetadata(map[string]string{"eval_id": evalID, "eval_dataset": d.Name, "eval_case": c.Name, "eval_trial": strconv.Itoa(trial)})},
		o.RunOptions...)
	var res *agent.Result
	var err error
	if t.PerRun != nil {
		var more []agent.RunOption
		if more, err = t.PerRun(); err == nil {
			opts = append(opts, more...)
		}
	}
	if err == nil && len(c.Conversation) > 0 {
		r := runConversation(ctx, t, c, opts)
		r.trial = trial
		return r
	}
	if err == nil {
		res, err = t.Agent.Run(ctx, c.Input, opts...)
	}
	if res == nil { // not even a Result: the input was refused before a run began
		res = refused(err)
	}
	return trialResult{c: c, trial: trial, res: res}
}

// notRun is a case trial an evaluation cancelled before it began.
func notRun(c *Case, trial int, err error) trialResult {
	res := &agent.Result{Outcome: agent.OutcomeError, TerminateReason: agent.ReasonAborted,
		Error: &agent.ErrorInfo{Code: "aborted", Message: "not run: the evaluation was cancelled (" + err.Error() + ")"}}
	return trialResult{c: c, trial: trial, res: res, checks: []Check{{Type: "run", Reason: res.Error.Message}}}
}

// begin stores the evaluation, running: its dataset and agents first.
func begin(ctx context.Context, st store.Store, id string, d *Dataset, targets []Target) (*journal.Writer, error) {
	labels := make([]string, len(targets))
	for i, t := range targets {
		labels[i] = t.Label
	}
	start := &runlog.Start{Kind: Kind, RunID: id, Input: map[string]any{"dataset": d, "agents": labels}, StartedAt: time.Now().UTC()}
	if p := policy.PrincipalFrom(ctx); p != nil {
		start.UserID = p.UserID // the evaluation's owner: the user its case runs act for
	}
	w, err := journal.Create(ctx, st, store.Run{ID: id, Kind: Kind, Name: d.Name, CreatedAt: start.StartedAt}, start, nil)
	if err != nil {
		return nil, fmt.Errorf("eval: storing the evaluation: %w", err)
	}
	return w, nil
}

// end stores the report as the evaluation's result.
func end(ctx context.Context, w *journal.Writer, rep *Report) error {
	status := store.Completed
	if ctx.Err() != nil {
		status = store.Aborted
	}
	passed, total := 0, 0
	for _, a := range rep.Agents {
		passed, total = passed+a.Passed, total+a.Total
	}
	sum := store.Summary{Outcome: fmt.Sprintf("%d/%d passed", passed, total)}
	if err := w.End(context.WithoutCancel(ctx), status, sum, 0, rep); err != nil {
		return fmt.Errorf("eval: storing the report: %w", err)
	}
	return nil
}

// Kind is the store kind of an evaluation (store.Run.Kind, store.Filter.Kind).
const Kind = "eval"
