package policy

import (
	"context"
	"encoding/json"
)

// Rule is a host's own policy rule, asked about every tool call an agent
// is about to make, after the rules of the spec's policy. The zero
// Verdict lets the call through.
//
// A rule should decide the same way for the same call: a resumed run
// asks again about the calls it replays from its log, and a call a rule
// blocks now that ran before makes the run diverge.
type Rule interface {
	Check(ctx context.Context, call Call) Verdict
}

// RuleFunc is a Rule written as a function.
type RuleFunc func(ctx context.Context, call Call) Verdict

// Check calls f.
func (f RuleFunc) Check(ctx context.Context, call Call) Verdict { return f(ctx, call) }

// Call is what a rule sees of a tool call: the tool, the arguments the
// model wrote (after the spec's input filters), and who makes it.
type Call struct {
	Tool      string
	Arguments json.RawMessage
	RunID     string
	Agent     string
	UserID    string
}

// Verdict is a rule's decision about a call. Every verdict other than
// the zero one is audited, with Reason.
type Verdict struct {
	// Block refuses the call: the model sees a policy_violation error
	// observation with Reason, and the run goes on.
	Block bool
	// Approval holds the call for a person, as approval.tools does: the
	// run pauses as awaiting_approval until a resume approves or denies
	// it. Block wins over Approval.
	Approval bool
	// Arguments, when not nil, replace the call's arguments: the tool
	// gets them (they must be JSON), the transcript keeps what the model
	// wrote.
	Arguments json.RawMessage
	// Reason says why, for the model when the call is blocked and for the
	// audit log always.
	Reason string
}
