package tool

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"runtime/debug"
	"strconv"
	"time"

	"github.com/agentry/agentry/event"
	"github.com/agentry/agentry/internal/lazyctx"
	"github.com/agentry/agentry/retry"
)

// Call is one tool call as handlers and middleware see it.
type Call struct {
	// ID is the model's id of the call.
	ID string
	// Name is the tool's name; Arguments the JSON object the model wrote.
	Name      string
	Arguments json.RawMessage
	// Tool is the tool being called and Info what it says of itself
	// (its idempotency class decides retries).
	Tool Tool
	Info Info
	// Turn is the loop turn the call belongs to, from 1, and Index the
	// call's place among the turn's calls, from 0.
	Turn, Index int
	// Attempt is the attempt in progress, from 1; Retry counts it.
	Attempt int
	// Started is when the call started, if its caller says: the first
	// attempt's deadline counts from it.
	Started time.Time
	// attachments are what the call attached (Attach).
	attachments map[string]string

	// Time is the run's time at the call (Noema's context timestamp): the
	// wall clock, or the instant a deterministic run was given
	// (agent.WithNow), which does not move.
	Time time.Time
	// Run is the run that makes the call, and Budget what remained of its
	// budgets when the call started.
	Run    *Run
	Budget Budget

	// Reporter receives what the tool Reports while the call runs (the
	// run turns it into tool_progress events); nil drops it.
	Reporter ProgressReporter

	// The first attempt's context and deadline live in the call, so that
	// handing them over allocates nothing; later attempts make their own
	// (a tool may still hold an earlier attempt's).
	ctx     callContext
	timeout lazyctx.Ctx
}

// Attach names something the call made or found, by reference (a URL, a
// path, a storage key), never the bytes: the run's Result lists it under
// attachments (the Proposal's attachments). A later call's name replaces
// an earlier one.
func (c *Call) Attach(name, ref string) {
	if c.attachments == nil {
		c.attachments = map[string]string{}
	}
	c.attachments[name] = ref
}

// ProgressReporter receives the progress tools report of their calls.
// Calls may report concurrently.
type ProgressReporter interface {
	ReportProgress(call *Call, p event.Progress)
}

// Report passes p, how far the call got or what its server logged, to
// the call's Reporter; it does nothing when the call has none. A tool
// finds its call with CallFrom.
func (c *Call) Report(p event.Progress) {
	if c != nil && c.Reporter != nil {
		c.Reporter.ReportProgress(c, p)
	}
}

// Attachments are what the call attached.
func (c *Call) Attachments() map[string]string { return c.attachments }

// callContext is a call's context: the caller's, carrying the call.
type callContext struct {
	context.Context
	call *Call
}

func (c *callContext) Value(key any) any {
	if _, ok := key.(callKey); ok {
		return c.call
	}
	return c.Context.Value(key)
}

// Key returns the call's idempotency key, RUN_ID:TURN:INDEX: stable
// across retries and resumes of the run. It is built when asked for.
func (c *Call) Key() string {
	runID := ""
	if c.Run != nil {
		runID = c.Run.RunID
	}
	return runID + ":" + strconv.Itoa(c.Turn) + ":" + strconv.Itoa(c.Index)
}

// Class returns the call's idempotency class: the tool's answer for these
// arguments when it is a Classifier, else its Info's, and NonIdempotent
// when it gives none.
func (c *Call) Class() Idempotency {
	class := c.Info.Idempotency
	if cl, ok := c.Tool.(Classifier); ok {
		class = cl.Idempotency(c.Arguments)
	}
	if !class.Valid() {
		return NonIdempotent
	}
	return class
}

// Deduplicates reports whether repeating the call with its key is
// harmless: the tool's answer for this call when it is a Deduplicator
// (an HTTP tool, by the host it is sent to), else its Info's. A resumed
// run sends again a non-idempotent call of unknown outcome only when it
// deduplicates.
func (c *Call) Deduplicates(ctx context.Context) bool {
	if d, ok := c.Tool.(Deduplicator); ok {
		return d.Deduplicates(ctx, c.Arguments)
	}
	return c.Info.Deduplicates
}

// Run is what a tool may know of the run calling it (Noema's Context).
// It is shared by every call of the run and must not be changed.
type Run struct {
	RunID, SessionID, ParentRunID string
	AgentName, AgentVersion       string
	// UserID and CorrelationID come from the caller (agentry run --user,
	// --correlation-id; agent.WithUser, agent.WithCorrelationID).
	UserID, CorrelationID string
	// TraceParent and TraceState are the W3C trace context of the run,
	// when it has one; TraceID is its trace id.
	TraceParent, TraceState, TraceID string
	// Metadata is the caller's, as given.
	Metadata map[string]string
}

// Unlimited marks a budget that has no limit.
const Unlimited = -1

// Budget is what remains of a run's budgets; Unlimited where it has none.
type Budget struct {
	Tokens    int
	CostUSD   float64
	ToolCalls int
	// Deadline is when the run times out; zero when it cannot.
	Deadline time.Time
}

type callKey struct{}

// CallFrom returns the call a tool is serving, from the context its Call
// method receives: its id, idempotency key, run and remaining budget. It
// returns nil outside a call made through Handle.
func CallFrom(ctx context.Context) *Call {
	c, _ := ctx.Value(callKey{}).(*Call)
	return c
}

// Output is what a handler returns for a call.
type Output struct {
	// JSON is the tool's result as it returned it; the trace keeps it
	// whole.
	JSON json.RawMessage
	// Observation, when set, is what the model is shown instead of JSON
	// (a result cut to size, say).
	Observation string
}

// Handler runs a call. The innermost handler of a chain is Handle, which
// calls the tool.
type Handler func(ctx context.Context, call *Call) (Output, error)

// Middleware wraps a Handler in the manner of net/http: it may look at or
// change the call, call next (or not), and look at or change the output.
type Middleware func(next Handler) Handler

// Chain wraps h with mws; the first is the outermost.
func Chain(h Handler, mws ...Middleware) Handler {
	for i := len(mws) - 1; i >= 0; i-- {
		h = mws[i](h)
	}
	return h
}

// Handle is the innermost handler: it calls call.Tool with the call in its
// context (see CallFrom). An empty result is JSON null.
func Handle(ctx context.Context, call *Call) (Output, error) {
	if call.Tool == nil {
		return Output{}, &ErrorDetails{Type: "unknown_tool", Message: fmt.Sprintf("there is no tool %q", call.Name), Recoverable: true}
	}
	var cctx context.Context
	if call.Attempt <= 1 && call.ctx.call == nil {
		call.ctx = callContext{ctx, call}
		cctx = &call.ctx
	} else {
		cctx = &callContext{ctx, call}
	}
	out, err := call.Tool.Call(cctx, call.Arguments)
	if err != nil {
		return Output{}, err
	}
	if len(out) == 0 {
		out = json.RawMessage("null")
	}
	return Output{JSON: out}, nil
}

// Timeout bounds each attempt of a call by d (0: no bound). A call that
// returns success keeps its result, however late: it took effect. One
// that fails after its deadline passed is a "timeout", transient, when
// its class is safe or idempotent; a non-idempotent one is an
// "unknown_outcome", not recoverable: it may have taken effect, and
// repeating it (under a new key) could do it twice.
func Timeout(d time.Duration) Middleware {
	return func(next Handler) Handler {
		if d <= 0 {
			return next
		}
		return func(ctx context.Context, call *Call) (Output, error) {
			cctx := &call.timeout
			if call.Attempt <= 1 && cctx.Unused() {
				from := call.Started
				if from.IsZero() {
					from = time.Now()
				}
				cctx.InitAt(ctx, from.Add(d), nil)
			} else {
				cctx = lazyctx.WithTimeout(ctx, d, nil)
			}
			defer cctx.Release()
			out, err := next(cctx, call)
			if err == nil || !cctx.Expired() {
				return out, err
			}
			if call.Class() == NonIdempotent {
				return Output{}, &ErrorDetails{Type: "unknown_outcome", Recoverable: false,
					Message: fmt.Sprintf("tool %s was cut off by its timeout of %s; it may have taken effect, so it was not repeated", call.Name, d)}
			}
			return Output{}, &ErrorDetails{Type: "timeout", Message: fmt.Sprintf("tool %s timed out after %s", call.Name, d), Recoverable: true}
		}
	}
}

// Retry repeats a safe or idempotent call (Call.Class) that failed
// transiently (IsTransient), as policy says; other calls run once. It
// counts call.Attempt and calls onRetry, if not nil, before each wait.
func Retry(policy retry.Policy, onRetry func(call *Call, err error, wait time.Duration)) Middleware {
	return func(next Handler) Handler {
		return func(ctx context.Context, call *Call) (Output, error) {
			tries := 1
			if call.Class().Retryable() {
				tries = policy.Tries()
			}
			for n := 1; ; n++ {
				call.Attempt = n
				out, err := next(ctx, call)
				if err == nil || n >= tries || !IsTransient(err) || ctx.Err() != nil {
					return out, err
				}
				wait := policy.Delay(ctx, n, 0)
				if onRetry != nil {
					onRetry(call, err, wait)
				}
				if !retry.Sleep(ctx, wait) {
					return out, err
				}
			}
		}
	}
}

// IsTransient reports whether a failed call may succeed if repeated.
func IsTransient(err error) bool {
	var d *ErrorDetails
	if errors.As(err, &d) {
		return d.Type == "timeout" || d.Type == "transient"
	}
	return errors.Is(err, ErrTransient) || errors.Is(err, context.DeadlineExceeded)
}

// Recover turns a panic of the tool into an error of type "panic". The
// stack goes to log (when not nil) and to the error's details, which the
// trace keeps and the model's observation leaves out.
func Recover(log *slog.Logger) Middleware {
	return func(next Handler) Handler {
		return func(ctx context.Context, call *Call) (out Output, err error) {
			defer func() {
				if r := recover(); r != nil {
					stack := string(debug.Stack())
					if log != nil {
						log.ErrorContext(ctx, "tool panicked", "tool", call.Name, "call_id", call.ID, "panic", fmt.Sprint(r), "stack", stack)
					}
					out, err = Output{}, &ErrorDetails{Type: "panic", Message: fmt.Sprintf("tool %s panicked: %v", call.Name, r),
						Details: map[string]any{"stack": stack}, Recoverable: false}
				}
			}()
			return next(ctx, call)
		}
	}
}

// Truncate cuts the observation of a result longer than limit bytes (at a
// UTF-8 boundary) and tells the model how many bytes were dropped; the
// output's JSON stays whole for the trace. limit <= 0 cuts nothing.
func Truncate(limit int) Middleware {
	return func(next Handler) Handler {
		if limit <= 0 {
			return next
		}
		return func(ctx context.Context, call *Call) (Output, error) {
			out, err := next(ctx, call)
			if err != nil || len(out.JSON) <= limit {
				return out, err
			}
			cut := limit
			for cut > 0 && out.JSON[cut]&0xC0 == 0x80 {
				cut--
			}
			dropped := len(out.JSON) - cut
			note := "\n[truncated: " + strconv.Itoa(dropped) + " of " + strconv.Itoa(len(out.JSON)) + " bytes dropped; ask for less, or for a part]"
			if cut+len(note) >= len(out.JSON) {
				return out, nil // a cut and its note would be no shorter than the whole
			}
			out.Observation = string(out.JSON[:cut]) + note
			return out, nil
		}
	}
}
