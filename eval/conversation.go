package eval

import (
	"context"
	"strconv"

	"github.com/agentry/agentry/agent"
	"github.com/agentry/agentry/internal/ids"
)

// asCase is a conversation's turn as a case of its own, for its run's
// checks: the case's name and tags, the turn's input, expected answer and
// assertions.
func (t *Turn) asCase(c *Case, input map[string]any) *Case {
	return &Case{Name: c.Name, Input: input, Expected: t.Expected, Tags: c.Tags, Assert: t.Assert}
}

// runConversation runs a trial of a conversation case: each turn a
// stored run in a conversation of its own, child of the evaluation.
func runConversation(ctx context.Context, t Target, c *Case, opts []agent.RunOption) trialResult {
	conv := ids.New("conv")
	r := trialResult{c: c, conversation: conv}
	for i := range c.Conversation {
		turn := &c.Conversation[i]
		input, err := turn.Input, error(nil)
		if input == nil {
			input, err = t.Agent.MessageInput(turn.Message)
		}
		var res *agent.Result
		if err == nil {
			more := append(append([]agent.RunOption{}, opts...), agent.WithConversation(conv),
				agent.WithMetadata(map[string]string{"eval_turn": strconv.Itoa(i + 1)}))
			res, err = t.Agent.Run(ctx, input, more...)
		}
		if res == nil { // not even a Result: the input was refused before a run began
			res = refused(err)
		}
		r.turns = append(r.turns, turnRun{input: input, res: res})
	}
	r.res = combined(r.turns)
	return r
}

// turnRun is one turn's run: its input and its Result.
type turnRun struct {
	input map[string]any
	res   *agent.Result
}

// combined is a conversation trial's figures as one Result: its turns'
// steps, tool calls and errors, tokens, cost and time, summed; its last
// turn's id, outcome and error.
func combined(turns []turnRun) *agent.Result {
	if len(turns) == 0 {
		return refused(nil)
	}
	last := *turns[len(turns)-1].res
	sum := last
	sum.Iterations, sum.Metrics.ToolCalls, sum.Metrics.ToolErrors, sum.TokenUsage.TotalTokens, sum.Metrics.DurationMS = 0, 0, 0, 0, 0
	sum.Steps = nil
	cost, known := 0.0, true
	for _, t := range turns {
		r := t.res
		sum.Iterations += r.Iterations
		sum.Metrics.ToolCalls += r.Metrics.ToolCalls
		sum.Metrics.ToolErrors += r.Metrics.ToolErrors
		sum.TokenUsage.TotalTokens += r.TokenUsage.TotalTokens
		sum.Metrics.DurationMS += r.Metrics.DurationMS
		sum.Steps = append(sum.Steps, r.Steps...)
		if r.EstimatedCost == nil {
			known = false
		} else {
			cost += *r.EstimatedCost
		}
		if r.Error != nil && sum.Error == nil { // the first turn that failed says why
			sum.Error = r.Error
		}
	}
	sum.EstimatedCost = nil
	if known {
		sum.EstimatedCost = &cost
	}
	return &sum
}

// scoreTrial checks a trial: a case's run, or each turn of a
// conversation's, its checks marked with the turn.
func scoreTrial(ctx context.Context, d *Dataset, r trialResult, judge Judge, known *verdicts) []Check {
	if len(r.turns) == 0 {
		return score(ctx, d, r.c, r.res, judge, known)
	}
	var out []Check
	for i, t := range r.turns {
		for _, ck := range score(ctx, d, r.c.Conversation[i].asCase(r.c, t.input), t.res, judge, known) {
			ck.Turn = i + 1
			out = append(out, ck)
		}
	}
	for i := len(r.turns); i < len(r.c.Conversation); i++ { // a turn the dataset has since
		out = append(out, Check{Type: "run", Turn: i + 1, Reason: "not run: the trial had no such turn"})
	}
	return out
}

// refused is the Result of a run refused before it began.
func refused(err error) *agent.Result {
	msg := "not run"
	if err != nil {
		msg = err.Error()
	}
	return &agent.Result{Outcome: agent.OutcomeError, Error: &agent.ErrorInfo{Code: "error", Message: msg}}
}
