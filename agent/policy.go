package agent

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"

	"github.com/agentry/agentry/event"
	"github.com/agentry/agentry/internal/journal"
	"github.com/agentry/agentry/llm"
	"github.com/agentry/agentry/policy"
	"github.com/agentry/agentry/runlog"
	"github.com/agentry/agentry/store"
	"github.com/agentry/agentry/tool"
)

// A run is the policy's Host: the policy's tool middleware
// (policy.Tools) reports its decisions to it and asks it to hold the
// calls that need a person's approval.
var _ policy.Host = (*run)(nil)

// Hold holds back a call that needs a person's approval: it goes on
// once approved, is denied with a policy_violation, or pauses the run (an
// ApprovalError) until a resume decides it.
func (r *run) Hold(ctx context.Context, call *tool.Call, rule, why string) (ok bool, out tool.Output, err error) {
	key := call.Key()
	approved, decided := r.s.cfg.decisions[key] // bound to keys by Resume: call ids repeat
	switch {
	case decided && approved:
		if err := r.Decided(ctx, call, rule, "approve", "approved by a person"); err != nil {
			return false, tool.Output{}, err
		}
		return true, tool.Output{}, nil
	case decided:
		out, err := policy.Denied(ctx, r, call, rule, r.s.cfg.denyReason())
		return false, out, err
	}
	if err := r.abortAfterLog(); err != nil {
		return false, tool.Output{}, err // aborted while it waited
	}
	reason := "the call waits for a person's approval"
	if why != "" {
		reason += ": " + why
	}
	if err := r.Decided(ctx, call, rule, "pause", reason); err != nil {
		return false, tool.Output{}, err
	}
	if j := r.link.journal; j != nil {
		j.add(store.KindApproval, call.Turn, key, runlog.Approval{CallID: call.ID, Tool: call.Name, Arguments: string(call.Arguments), Rule: rule})
	}
	return false, tool.Output{}, &ApprovalError{CallID: call.ID, Tool: call.Name, Key: key, Arguments: call.Arguments, Rule: rule}
}

// Replayed reports whether call is one a resumed run or a replay serves
// from its log: the policy let it through when it ran.
func (r *run) Replayed(call *tool.Call) bool {
	j := r.link.journal
	return call.Turn < r.quiet() || j != nil && j.w == nil
}

// Decided reports a policy decision on a tool call other than a plain
// allow: a policy_decision event and, in a stored run, an audit record.
// A call a resumed run replays was reported when it ran.
func (r *run) Decided(ctx context.Context, call *tool.Call, rule, decision, reason string) error {
	if call.Turn < r.quiet() {
		return nil
	}
	user := r.info.UserID
	if decision == "approve" || decision == "deny" {
		if by, ok := r.decider(call.Key()); ok {
			user = by // a person's decision, on record as theirs
		}
	}
	return r.reportAs(ctx, "tool:"+call.Name, call.ID, user, rule, decision, reason)
}

// checkPolicy refuses a rate limit of a tool the agent does not have (a
// misspelt name would limit nothing), and host rules without a usable
// name.
func (a *Agent) checkPolicy() []string {
	probs := policy.CheckRules(a.o.rules)
	if p := a.spec.Policy; p != nil {
		for name := range p.RateLimits {
			if _, ok := a.tools.byName[name]; !ok && name != "*" {
				probs = append(probs, fmt.Sprintf("policy.rate_limits.%s: the agent has no tool %q (name one of its tools, or *)", name, name))
			}
		}
	}
	slices.Sort(probs)
	return probs
}

// report emits a policy decision on target and audits it.
func (r *run) report(ctx context.Context, target, callID, rule, decision, reason string) error {
	return r.reportAs(ctx, target, callID, r.info.UserID, rule, decision, reason)
}

// reportAs is report of a decision user made.
func (r *run) reportAs(ctx context.Context, target, callID, user, rule, decision, reason string) error {
	if r.s.bus.Active() {
		data := map[string]any{"rule": rule, "decision": decision, "target": target, "reason": reason}
		if callID != "" {
			data["call_id"] = callID
		}
		r.emit(event.Event{Type: event.PolicyDecision, Data: data})
	}
	rec := store.AuditRecord{Agent: r.a.spec.AgentName, UserID: user, Rule: rule,
		Decision: decision, Target: target, Reason: reason}
	switch j := r.link.journal; {
	case j != nil && j.w != nil:
		return j.w.Audit(ctx, rec)
	case j == nil && r.s.cfg.store != nil:
		// A run tracing did not sample keeps no log, but the audit log
		// holds every decision of the policy.
		return journal.Audit(ctx, r.s.cfg.store, r.a.redact, r.st.RunID, rec)
	}
	return nil // a replay decides again what its log has on record
}

// filterOutput applies the policy's filters on the output to a final
// answer, its text and its object together: a block fails the run (its
// answer is not returned), a redact replaces what the filter finds.
func (r *run) filterOutput(final *Final) (*Final, error) {
	doc, _ := json.Marshal(struct {
		Text   string `json:"text"`
		Output any    `json:"output,omitempty"`
	}{final.Text, final.Output})
	out, applied := r.a.outFilters.Apply(string(doc), true)
	if len(applied) == 0 {
		return final, nil
	}
	if last := applied[len(applied)-1]; last.Action == policy.Block {
		rule := "content_filters." + last.Filter
		// The answer is withheld from the Result: its text, and the
		// reply that carried it in the transcript.
		r.rewriteAnswer(func(string) string { return "[BLOCKED:" + rule + "]" })
		r.st.LastContent = ""
		reason := fmt.Sprintf("the content filter %s found what it blocks in the answer", last.Filter)
		if err := r.report(r.ctx, "output", "", rule, "block", reason); err != nil {
			return nil, err
		}
		return nil, withDetails(fmt.Errorf("%w: %s", ErrPolicyViolation, reason), map[string]any{"rule": rule})
	}
	var red struct {
		Text   string `json:"text"`
		Output any    `json:"output"`
	}
	if err := json.Unmarshal([]byte(out), &red); err != nil {
		return nil, fmt.Errorf("%w: redacting the answer: %v", ErrPolicyViolation, err)
	}
	cp := *final
	cp.Text = red.Text
	if final.Output != nil {
		cp.Output = red.Output
	}
	r.st.LastContent = r.a.outFilters.Redact(r.st.LastContent)
	r.rewriteAnswer(r.a.outFilters.Redact)
	for _, f := range applied {
		if err := r.report(r.ctx, "output", "", "content_filters."+f.Filter, "redact", "redacted in the answer"); err != nil {
			return nil, err
		}
	}
	return &cp, nil
}

// rewriteAnswer rewrites the text of the model's last reply in the
// transcript, the one that carried the answer.
func (r *run) rewriteAnswer(fn func(string) string) {
	msgs := r.st.Messages
	for i := len(msgs) - 1; i >= 0; i-- {
		if msgs[i].Role == llm.RoleAssistant {
			msgs[i].Content = fn(msgs[i].Content)
			return
		}
	}
}

// filterInput applies the policy's filters on the input to the run's
// input and the messages rendered from it. A redacting filter replaces
// what it finds; a blocking one withholds the input and the messages
// (the run is refused once its log is open: reportInput). It returns
// what applied.
func (r *run) filterInput() []policy.Applied {
	f := r.a.inFilters
	st := r.st
	var applied []policy.Applied
	doc, err := json.Marshal(st.Input)
	if err == nil {
		out, got := f.Apply(string(doc), true)
		applied = append(applied, got...)
		if len(got) > 0 && got[len(got)-1].Action != policy.Block {
			var in map[string]any
			if json.Unmarshal([]byte(out), &in) == nil {
				st.Input = in
			}
		}
	}
	for i := range st.Messages {
		m := &st.Messages[i]
		out, got := f.Apply(m.Content, false)
		applied = append(applied, got...)
		m.Content = out
	}
	if blockedBy(applied) != "" {
		rule := "[BLOCKED:content_filters." + blockedBy(applied) + "]"
		st.Input = map[string]any{"blocked": rule}
		for i := range st.Messages {
			st.Messages[i].Content = rule
		}
	}
	return applied
}

// blockedBy is the name of the first blocking filter that applied.
func blockedBy(applied []policy.Applied) string {
	for _, a := range applied {
		if a.Action == policy.Block {
			return a.Filter
		}
	}
	return ""
}

// reportInput audits what the input filters did, and refuses the run
// when one blocked.
func (r *run) reportInput(ctx context.Context, applied []policy.Applied) error {
	if name := blockedBy(applied); name != "" {
		rule := "content_filters." + name
		reason := fmt.Sprintf("the content filter %s found what it blocks in the run's input", name)
		if err := r.report(ctx, "input", "", rule, "block", reason); err != nil {
			return err
		}
		return withDetails(fmt.Errorf("%w: %s", ErrPolicyViolation, reason), map[string]any{"rule": rule})
	}
	seen := map[string]bool{}
	for _, a := range applied {
		if !seen[a.Filter] {
			seen[a.Filter] = true
			if err := r.report(ctx, "input", "", "content_filters."+a.Filter, "redact", "redacted in the run's input"); err != nil {
				return err
			}
		}
	}
	return nil
}
