package agent

import (
	"context"
	"fmt"

	"github.com/agentry/agentry/policy"
)

// denial is something the policy's access rules refused as a run began,
// audited once the run's log is open (refuses: the run itself is).
type denial struct {
	rule, target, reason string
	refuses              bool
}

// access is the agent's access rules, or nil.
func (a *Agent) access() *policy.Access {
	if a.spec.Policy == nil {
		return nil
	}
	return a.spec.Policy.Access
}

// admit says whether the caller (the principal of ctx) may run the
// agent; a refusal is noted for the run's start.
func (r *run) admit(ctx context.Context) bool {
	rule, reason := r.a.access().CheckRun(policy.PrincipalFrom(ctx), r.a.spec.AgentName)
	if rule == "" {
		return true
	}
	n := r.note()
	n.denials = append(n.denials, denial{rule: rule, target: "agent:" + r.a.spec.AgentName, reason: reason, refuses: true})
	return false
}

// mayRead says whether the caller may read the memory stream or
// collection name; a refusal is noted (refuses: the run is refused).
func (r *run) mayRead(ctx context.Context, name string, refuses bool) bool {
	rule, reason := r.a.access().CheckMemory(policy.PrincipalFrom(ctx), name)
	if rule == "" {
		return true
	}
	n := r.note()
	n.denials = append(n.denials, denial{rule: rule, target: "memory:" + name, reason: reason, refuses: refuses})
	return false
}

// reportDenials audits what the access rules refused as the run began,
// and refuses the run when one of them does.
func (r *run) reportDenials(ctx context.Context) error {
	if r.notes == nil {
		return nil
	}
	var refused error
	for _, d := range r.notes.denials {
		if err := r.report(ctx, d.target, "", d.rule, "block", d.reason); err != nil {
			return err
		}
		if d.refuses && refused == nil {
			refused = withDetails(fmt.Errorf("%w: %s", ErrPolicyViolation, d.reason), map[string]any{"rule": d.rule})
		}
	}
	return refused
}

// actFor makes the run act for the caller's principal. A WithUser that
// names another user is refused: a caller may not read or write another
// user's memory by naming them.
func (r *run) actFor(ctx context.Context) {
	p := policy.PrincipalFrom(ctx)
	info := &r.s.cfg.info
	switch {
	case p == nil || p.UserID == "":
	case info.UserID != "" && info.UserID != p.UserID:
		n := r.note()
		n.denials = append(n.denials, denial{rule: "access.user", target: "user:" + info.UserID, refuses: true,
			reason: fmt.Sprintf("user %s may not act for the user %s: a run acts for its caller's principal (WithUser names another)", p.UserID, info.UserID)})
		info.UserID = p.UserID
	default:
		info.UserID = p.UserID
	}
}
