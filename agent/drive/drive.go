// Package drive is the protocol an outside engine drives an agent's run
// by, a turn at a time, as database/sql/driver is the protocol beneath
// database/sql: data only. A durable-execution engine (package temporal)
// starts a run with a Plan that hands its tool calls out (Dispatch), runs
// each call as a task of its own (agent.Agent.Exec), and resumes the run
// with their results, in whichever process. A program that builds and
// runs agents does not need it.
package drive

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/agentry/agentry/runlog"
	"github.com/agentry/agentry/tool"
)

// Plan is how a session's run is driven (agent.Drive gives it): every
// field is optional; its zero value drives nothing.
type Plan struct {
	// Driver names what drives the run, something that moves between
	// processes, such as a workflow ("temporal:NAMESPACE/ID"). The run's
	// lease is held by a holder named after it, a Resume of the same
	// driver takes it over from an earlier holder of its (whose writes
	// are then refused), and the run's start record names it: a Resume of
	// another driver (or of none) is refused, so that the run is decided
	// where it is driven.
	Driver string
	// RunID is the id the run is given instead of a new one: a host
	// that must name a run before it starts (a workflow's id) says which.
	// The store refuses an id already taken.
	RunID string
	// Dispatch makes the run hand out the tool calls it would run
	// instead of running them: each call that passed the policy (and,
	// when non-idempotent, had its intent committed) is listed, and the
	// run stops after its turn with a *DispatchError. The executor runs
	// each call (agent.Agent.Exec) and a Resume given Results goes on
	// from there. Calls a run answers itself (from its cache, a handoff,
	// a sub-agent, the calls of an agent it was handed to) are not handed
	// out. A dispatching session needs a store.
	Dispatch bool
	// Results are the results of the calls a resumed run handed out, by
	// idempotency key: the run records each as the call's result, as if
	// it had run the call itself. A result for a call the log already
	// holds is ignored.
	Results map[string]runlog.ToolResult
	// RanThrough, when set, tells a resumed dispatching run that its
	// executor was handed the calls of turns up to it, and no later one:
	// a call of a later turn whose intent is on record was handed out by
	// a planning attempt that died before its hand-out arrived, so it
	// never ran, and it is handed out again rather than paused on as a
	// call of unknown outcome.
	RanThrough *int
	// Deadline ends the run with agent.ErrTimeout at that time, when it
	// comes before its own timeout would: a host that counts a run's time
	// across processes gives the deadline its time left makes. A resumed
	// session whose deadline passed goes through its log, then ends timed
	// out.
	Deadline time.Time
}

// Hold is how long a run that handed its calls out stays leased to its
// driver without hearing from it: long enough for calls and approvals
// that take days. A driver that comes back takes the lease over at once.
const Hold = 30 * 24 * time.Hour

// ErrDispatched is matched by the error of a run that stopped to have
// its turn's tool calls run elsewhere (Plan.Dispatch). The run has not
// ended: its log holds everything so far, its status stays running (or
// awaiting approval, when calls of the same turn wait for a person), and
// its lease stays with its driver. A *DispatchError lists the calls.
var ErrDispatched = errors.New("run dispatched its tool calls")

// PendingCall is a tool call a run handed out: what the executor needs
// to run it with agent.Agent.Exec.
type PendingCall struct {
	// Key is the call's idempotency key, RUN_ID:TURN:INDEX.
	Key       string          `json:"key"`
	CallID    string          `json:"call_id"`
	Tool      string          `json:"tool"`
	Arguments json.RawMessage `json:"arguments"`
	Turn      int             `json:"turn"`
	Index     int             `json:"index"`
	// Idempotency is the call's class: a non-idempotent call must run at
	// most once, unless Deduplicates says its tool drops a repeat of the
	// same key.
	Idempotency  tool.Idempotency `json:"idempotency"`
	Deduplicates bool             `json:"deduplicates,omitempty"`
	// Timeout bounds one attempt of the call (0: none); Exec retries by
	// the tool's retry policy.
	Timeout time.Duration `json:"timeout,omitempty"`
}

// DispatchError is the error of a run that stopped with calls handed
// out (ErrDispatched).
type DispatchError struct {
	// Calls are the calls to run, in the turn's order.
	Calls []PendingCall
	// Paused, when calls of the same turn wait for a person, is the
	// error they paused the run with (it matches
	// agent.ErrAwaitingApproval; the run's Result lists them in Waiting):
	// decide them (agent.Approve, agent.Deny) when resuming.
	Paused error
}

func (e *DispatchError) Error() string {
	keys := make([]string, len(e.Calls))
	for i, c := range e.Calls {
		keys[i] = c.Key + " (" + c.Tool + ")"
	}
	return fmt.Sprintf("%s: %s", ErrDispatched, strings.Join(keys, ", "))
}

// Is makes errors.Is(err, ErrDispatched) true.
func (e *DispatchError) Is(target error) bool { return target == ErrDispatched }

// Unwrap is Paused: errors.Is and errors.As reach the calls that wait.
func (e *DispatchError) Unwrap() error { return e.Paused }
