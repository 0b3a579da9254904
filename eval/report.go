package eval

import (
	"fmt"
	"maps"
	"math"
	"slices"
	"time"
)

// Report is what an evaluation found, per agent, and what changed between
// two agents or against a baseline.
type Report struct {
	ID        string        `json:"id"`
	Dataset   string        `json:"dataset"`
	CreatedAt time.Time     `json:"created_at"`
	Trials    int           `json:"trials"`
	Agents    []AgentReport `json:"agents"`
	// Comparison is of the second agent with the first (with more than
	// two, compare them two by two: CompareAgents).
	Comparison *Comparison `json:"comparison,omitempty"`
	// Baseline is of the first agent with the agent of the same label in
	// an earlier evaluation (else its first): the regression gate's.
	Baseline *Comparison `json:"baseline,omitempty"`
	// RescoreOf is the evaluation whose runs this one scored again;
	// NotRun the cases of the dataset it had no runs of.
	RescoreOf string   `json:"rescore_of,omitempty"`
	NotRun    []string `json:"not_run,omitempty"`
}

// AgentReport is one agent's figures over every case and trial.
type AgentReport struct {
	Agent string `json:"agent"`
	// PassRate is the passed case trials over all; PassAtK the cases
	// that passed in at least one of their trials, over all cases.
	PassRate      float64             `json:"pass_rate"`
	PassAtK       float64             `json:"pass_at_k"`
	Passed        int                 `json:"passed"`
	Total         int                 `json:"total"`
	Cases         []CaseResult        `json:"cases"`
	StepsPerTask  float64             `json:"steps_per_task"`
	ToolCalls     int                 `json:"tool_calls"`
	ToolErrorRate float64             `json:"tool_error_rate"`
	ToolLatencyMS map[string]Latency  `json:"tool_latency_ms"`
	TokenUsage    int                 `json:"token_usage"`
	CostUSD       *float64            `json:"cost_usd"` // nil when a run's cost is unknown
	DurationMS    float64             `json:"duration_ms"`
	Tags          map[string]TagScore `json:"tags,omitempty"`
}

// CaseResult is one trial of one case.
type CaseResult struct {
	Case   string  `json:"case"`
	Trial  int     `json:"trial"`
	Passed bool    `json:"passed"`
	Checks []Check `json:"checks"`
	RunID  string  `json:"run_id"`
	// Conversation and Runs are a conversation case's: its conversation,
	// and each turn's run (RunID is the last).
	Conversation string   `json:"conversation,omitempty"`
	Runs         []string `json:"runs,omitempty"`
	// Error is the run's, when it failed.
	Error string `json:"error,omitempty"`
	// The run's figures.
	Steps      int      `json:"steps"`
	ToolCalls  int      `json:"tool_calls"`
	ToolErrors int      `json:"tool_errors"`
	Tokens     int      `json:"tokens"`
	CostUSD    *float64 `json:"cost_usd"`
	DurationMS float64  `json:"duration_ms"`
}

// Latency is a tool's p50 and p95 over its calls, in milliseconds.
type Latency struct {
	P50   float64 `json:"p50"`
	P95   float64 `json:"p95"`
	Calls int     `json:"calls"`
}

// TagScore is the pass rate of the cases with a tag.
type TagScore struct {
	Passed int `json:"passed"`
	Total  int `json:"total"`
}

// Comparison is how one agent (To) did against another (From): the
// deltas (To minus From) and the case trials that changed.
type Comparison struct {
	From string `json:"from"`
	To   string `json:"to"`
	// Baseline is the evaluation From comes from, when it is another.
	Baseline      string   `json:"baseline,omitempty"`
	PassRateDelta float64  `json:"pass_rate_delta"`
	StepsDelta    float64  `json:"steps_per_task_delta"`
	TokenDelta    int      `json:"token_usage_delta"`
	CostDelta     *float64 `json:"cost_usd_delta"`
	DurationDelta float64  `json:"duration_ms_delta"`
	Regressions   []string `json:"regressions"` // CASE#TRIAL: passed in From, fails in To
	Fixes         []string `json:"fixes"`       // CASE#TRIAL: failed in From, passes in To
	// Unmatched are the case trials only one side has.
	Unmatched []string `json:"unmatched,omitempty"`
}

// summarize makes an agent's report of its trials.
func summarize(label string, trials []trialResult) AgentReport {
	a := AgentReport{Agent: label, ToolLatencyMS: map[string]Latency{}, Total: len(trials)}
	cost, costKnown := 0.0, true
	steps, toolErrors := 0, 0
	lat := map[string][]float64{}
	anyPassed := map[string]bool{}
	tags := map[string]TagScore{}
	for _, t := range trials {
		res := t.res
		r := CaseResult{Case: t.c.Name, Trial: t.trial, Passed: true, Checks: t.checks, RunID: res.ID, Steps: res.Iterations,
			ToolCalls: res.Metrics.ToolCalls, ToolErrors: res.Metrics.ToolErrors, Tokens: res.TokenUsage.TotalTokens,
			CostUSD: res.EstimatedCost, DurationMS: res.Metrics.DurationMS, Conversation: t.conversation}
		for _, tr := range t.turns {
			r.Runs = append(r.Runs, tr.res.ID)
		}
		for _, ck := range t.checks {
			r.Passed = r.Passed && ck.Passed
		}
		if t.res.Error != nil {
			r.Error = t.res.Error.Code + ": " + t.res.Error.Message
		}
		if r.Passed {
			a.Passed++
			anyPassed[t.c.Name] = true
		} else if _, seen := anyPassed[t.c.Name]; !seen {
			anyPassed[t.c.Name] = false
		}
		for _, tag := range t.c.Tags {
			ts := tags[tag]
			ts.Total++
			if r.Passed {
				ts.Passed++
			}
			tags[tag] = ts
		}
		a.Cases = append(a.Cases, r)
		steps += res.Iterations
		a.ToolCalls += res.Metrics.ToolCalls
		toolErrors += res.Metrics.ToolErrors
		a.TokenUsage += res.TokenUsage.TotalTokens
		a.DurationMS += res.Metrics.DurationMS
		if res.EstimatedCost == nil {
			costKnown = false
		} else {
			cost += *res.EstimatedCost
		}
		for _, s := range res.Steps {
			if s.Action != nil {
				lat[s.Action.Tool] = append(lat[s.Action.Tool], s.Action.DurationMS)
			}
		}
	}
	if a.Total > 0 {
		a.PassRate = float64(a.Passed) / float64(a.Total)
		a.StepsPerTask = float64(steps) / float64(a.Total)
	}
	if a.ToolCalls > 0 {
		a.ToolErrorRate = float64(toolErrors) / float64(a.ToolCalls)
	}
	passedCases := 0
	for _, ok := range anyPassed {
		if ok {
			passedCases++
		}
	}
	if len(anyPassed) > 0 {
		a.PassAtK = float64(passedCases) / float64(len(anyPassed))
	}
	if costKnown {
		a.CostUSD = &cost
	}
	for tool, ms := range lat {
		slices.Sort(ms)
		a.ToolLatencyMS[tool] = Latency{P50: percentile(ms, 0.50), P95: percentile(ms, 0.95), Calls: len(ms)}
	}
	if len(tags) > 0 {
		a.Tags = tags
	}
	return a
}

// percentile of sorted values, by the nearest rank.
func percentile(sorted []float64, p float64) float64 {
	if len(sorted) == 0 {
		return 0
	}
	i := int(math.Ceil(p*float64(len(sorted)))) - 1
	return sorted[max(i, 0)]
}

// compareAgents compares the second agent with the first, when there
// are two or more.
func (r *Report) compareAgents() {
	if len(r.Agents) >= 2 {
		r.Comparison = compare(&r.Agents[0], &r.Agents[1])
	}
}

// AgainstBaseline compares the first agent of r with the agent of the
// same label in baseline (an earlier evaluation), else with its first,
// into r.Baseline: what a regression gate reads.
func (r *Report) AgainstBaseline(baseline *Report) {
	if len(r.Agents) == 0 || len(baseline.Agents) == 0 {
		return
	}
	from := &baseline.Agents[0]
	for i := range baseline.Agents {
		if baseline.Agents[i].Agent == r.Agents[0].Agent {
			from = &baseline.Agents[i]
		}
	}
	r.Baseline = CompareAgents(from, &r.Agents[0])
	r.Baseline.Baseline = baseline.ID
}

// CompareAgents is how to did against from: the deltas (to minus from)
// and the case trials that regressed or were fixed.
func CompareAgents(from, to *AgentReport) *Comparison {
	return compare(from, to)
}

func compare(from, to *AgentReport) *Comparison {
	c := &Comparison{From: from.Agent, To: to.Agent, PassRateDelta: to.PassRate - from.PassRate,
		StepsDelta: to.StepsPerTask - from.StepsPerTask, TokenDelta: to.TokenUsage - from.TokenUsage,
		DurationDelta: to.DurationMS - from.DurationMS, Regressions: []string{}, Fixes: []string{}}
	if from.CostUSD != nil && to.CostUSD != nil {
		d := *to.CostUSD - *from.CostUSD
		c.CostDelta = &d
	}
	before := map[string]bool{}
	for _, cr := range from.Cases {
		before[key(cr)] = cr.Passed
	}
	seen := map[string]bool{}
	for _, cr := range to.Cases {
		k := key(cr)
		seen[k] = true
		was, ok := before[k]
		switch {
		case !ok:
			c.Unmatched = append(c.Unmatched, k)
		case was && !cr.Passed:
			c.Regressions = append(c.Regressions, k)
		case !was && cr.Passed:
			c.Fixes = append(c.Fixes, k)
		}
	}
	for _, k := range slices.Sorted(maps.Keys(before)) {
		if !seen[k] {
			c.Unmatched = append(c.Unmatched, k)
		}
	}
	return c
}

// key names a case trial across evaluations: CASE#TRIAL.
func key(cr CaseResult) string { return fmt.Sprintf("%s#%d", cr.Case, cr.Trial) }
