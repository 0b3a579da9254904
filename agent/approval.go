package agent

import (
	"encoding/json"
	"fmt"
	"strings"
)

// ApprovalError is the error of one call that waits for a person: one
// the policy's approval rule holds back (Rule set; it has not run), or a
// non-idempotent call of unknown outcome a resumed run met (it was sent,
// the run stopped before its result was written, and its tool does not
// deduplicate). The run pauses: Run returns an error that matches
// ErrAwaitingApproval with errors.Is and gives the first waiting call's
// *ApprovalError to errors.As; Result.Waiting lists them all.
type ApprovalError struct {
	// Key is the call's idempotency key, RUN_ID:TURN:INDEX: what Approve
	// and Deny take (or CallID, when it names one waiting call).
	Key    string `json:"key"`
	CallID string `json:"call_id"`
	Tool   string `json:"tool"`
	// Arguments are the call's arguments as the model wrote them (in a
	// Result, redacted as the rest of it is).
	Arguments json.RawMessage `json:"arguments"`
	// Rule is the policy rule that holds the call back
	// ("approval.tools"), or "" for a call of unknown outcome.
	Rule string `json:"rule,omitempty"`
	// Reason says why the call waits, in words: the error's text.
	Reason string `json:"reason"`
}

func (e *ApprovalError) Error() string {
	if e.Reason != "" {
		return e.Reason
	}
	return e.reason()
}

// reason is why the call waits, naming it.
func (e *ApprovalError) reason() string {
	if e.Rule == RuleCaller {
		return fmt.Sprintf("call %s (%s, key %s) is the caller's tool's: the run handed it back, and waits for its result", e.CallID, e.Tool, e.Key)
	}
	if e.Rule != "" {
		return fmt.Sprintf("call %s (%s, key %s) waits for a person's approval (policy.%s)", e.CallID, e.Tool, e.Key, e.Rule)
	}
	return fmt.Sprintf("call %s (%s, key %s) may have taken effect before the run stopped: approve it to send it again, or deny it",
		e.CallID, e.Tool, e.Key)
}

// Is makes errors.Is(err, ErrAwaitingApproval) true.
func (e *ApprovalError) Is(target error) bool { return target == ErrAwaitingApproval }

// waiting is e as a Result lists it: its reason written out, its
// arguments JSON (text the model wrote that is not JSON kept as a
// string).
func (e *ApprovalError) waiting() ApprovalError {
	w := *e
	w.Reason = e.Error()
	if !json.Valid(w.Arguments) {
		w.Arguments, _ = json.Marshal(string(e.Arguments))
	}
	return w
}

// awaitingError is the error of a run paused on calls that wait for a
// person: errors.Is finds ErrAwaitingApproval, errors.As each call's
// *ApprovalError, in the turn's order.
type awaitingError struct {
	calls []*ApprovalError
}

func (e *awaitingError) Error() string {
	why := make([]string, len(e.calls))
	for i, c := range e.calls {
		why[i] = c.Error()
	}
	return fmt.Sprintf("%s: %s; approve or deny each by its key when resuming (Approve, Deny)", ErrAwaitingApproval, strings.Join(why, "; "))
}

func (e *awaitingError) Unwrap() []error {
	out := make([]error, 0, len(e.calls)+1)
	out = append(out, ErrAwaitingApproval)
	for _, c := range e.calls {
		out = append(out, c)
	}
	return out
}

// waitingCalls are the calls e waits on.
func (e *awaitingError) waitingCalls() []ApprovalError {
	out := make([]ApprovalError, len(e.calls))
	for i, c := range e.calls {
		out[i] = c.waiting()
	}
	return out
}
