package agent

import (
	"encoding/json"
	"fmt"
	"strings"
	"time"

	oteltrace "go.opentelemetry.io/otel/trace"

	"github.com/agentry/agentry/event"
	"github.com/agentry/agentry/internal/ids"
	"github.com/agentry/agentry/llm"
	"github.com/agentry/agentry/runlog"
	"github.com/agentry/agentry/spec"
	"github.com/agentry/agentry/store"
	"github.com/agentry/agentry/tool"
)

// RunOption configures a session.
type RunOption func(*runConfig)

type runConfig struct {
	onEvent   []listener
	bus       *event.Bus
	provider  llm.Provider
	parent    *link
	store     store.Store
	resume    *resumeConfig
	decisions map[string]bool // Approve (true) and Deny (false), by key once Resume bound them
	// info is what tools see of the run: the options set who runs it,
	// Run the rest (setRunInfo).
	info tool.Run
	// extra holds what few runs are given: nil for most (a session's
	// size is what a paused run costs).
	extra *runExtra
}

// runExtra is the rarely given part of a session's options.
type runExtra struct {
	denyReason   string    // why the denied calls were denied (WithDenyReason)
	decidedBy    string    // who approved or denied them (DecidedBy)
	liveTools    bool      // a replay runs safe and idempotent tools again
	seeded       bool      // WithSeed, or the spec's seed
	seedIDs      bool      // WithSeed: the run's ids derive from the seed too
	seed         int64     // what ids and randomness derive from
	now          time.Time // WithNow: the run's clock, which does not move
	images       []llm.Image
	runID        string // drive.Plan.RunID
	runIDSet     bool
	driver       string                       // drive.Plan.Driver
	dispatch     bool                         // drive.Plan.Dispatch
	results      map[string]runlog.ToolResult // drive.Plan.Results
	answers      map[string]string            // CallerResult, by key or call id until Resume binds them to results
	toolChoice   string                       // WithToolChoice
	instructions string                       // WithInstructions
	deadline     time.Time                    // drive.Plan.Deadline
	ranThrough   int                          // drive.Plan.RanThrough
	ranSet       bool
	limits       *spec.Limits  // WithLimits
	parentBudget *tool.Budget  // what a sub-agent's parent has left
	conversation string        // WithConversation
	history      []llm.Message // the history a resumed or replayed run started from
	historySet   bool
	historyCalls int // the model attempts of the conversation before it
}

// more is c's extra options, made when an option first sets one.
func (c *runConfig) more() *runExtra {
	if c.extra == nil {
		c.extra = &runExtra{}
	}
	return c.extra
}

// denyReason is why the calls Deny names are denied, or "".
func (c *runConfig) denyReason() string {
	if c.extra == nil {
		return ""
	}
	return c.extra.denyReason
}

// listener is a subscription WithEvents asked for.
type listener struct {
	fn    func(event.Event)
	opts  []event.Option
	unsub func() // once the session subscribed it
}

// WithEvents calls fn with each event of the session, in order, on a
// goroutine of its own (see event.Bus.Subscribe for the options: by
// default a listener that falls a buffer behind loses the oldest events,
// with event.Block the run waits for it). Run returns after fn has seen
// every event of the run.
func WithEvents(fn func(event.Event), opts ...event.Option) RunOption {
	return func(c *runConfig) { c.onEvent = append(c.onEvent, listener{fn: fn, opts: opts}) }
}

// WithEventBus forwards the session's events to b (a service's bus, say).
func WithEventBus(b *event.Bus) RunOption { return func(c *runConfig) { c.bus = b } }

// WithParentRunID marks the session's run, and its events, as part of a
// larger run (a pipeline's).
func WithParentRunID(id string) RunOption { return func(c *runConfig) { c.info.ParentRunID = id } }

// WithSessionID sets the session's id instead of a random one.
func WithSessionID(id string) RunOption { return func(c *runConfig) { c.info.SessionID = id } }

// WithSessionProvider makes this session call p instead of the agent's
// model (wrapped with the agent's retry policy and middleware).
func WithSessionProvider(p llm.Provider) RunOption { return func(c *runConfig) { c.provider = p } }

// WithUser sets the id of the user the run acts for: tools read it from
// their call (tool.CallFrom) and logs carry it.
func WithUser(id string) RunOption { return func(c *runConfig) { c.info.UserID = id } }

// WithCorrelationID sets the id that ties the run to the caller's request.
func WithCorrelationID(id string) RunOption { return func(c *runConfig) { c.info.CorrelationID = id } }

// WithTraceContext sets the W3C trace context the run belongs to: its
// traceparent ("00-TRACEID-SPANID-FLAGS") and its tracestate (the
// vendors' entries, passed on as given; "" for none). A caller that has
// a trace id but no parent span gives the trace id alone as traceparent
// (32 hex digits): the run's traceparent is made from it. The trace id
// is on every event, in the Result and in log records; model providers
// and http_request receive traceparent and tracestate.
func WithTraceContext(traceparent, tracestate string) RunOption {
	return func(c *runConfig) {
		c.info.TraceState = tracestate
		if len(traceparent) == 32 && !strings.Contains(traceparent, "-") {
			c.info.TraceID, c.info.TraceParent = traceparent, ""
			return
		}
		c.info.TraceID, c.info.TraceParent = "", traceparent
	}
}

// WithSeed makes the run's randomness (retry jitter), as a spec's seed
// does, and its ids derive from seed instead of the runtime's generator.
// With WithNow too, two runs of a scripted agent give byte-identical
// Results and events (the Result says deterministic). The ids mix the
// seed with the agent, the parent run and the input: the same run given
// the same seed has the same id, which a store keeps once.
func WithSeed(seed int64) RunOption {
	return func(c *runConfig) { e := c.more(); e.seeded, e.seedIDs, e.seed = true, true, seed }
}

// WithImages gives the run's task images (a URL, or bytes with their
// MIME type): the last user message the run starts from carries them to
// the model, and a router passes over models that take none.
func WithImages(images ...llm.Image) RunOption {
	return func(c *runConfig) { e := c.more(); e.images = append(e.images, images...) }
}

// WithNow sets the run's clock: it starts at t and does not move, so every
// time the run reports is t and every duration 0 (the run's deadlines
// still follow the wall clock). Tools see it as tool.Call.Time.
func WithNow(t time.Time) RunOption { return func(c *runConfig) { c.more().now = t } }

// WithMetadata gives tools the caller's metadata (tool.CallFrom).
func WithMetadata(md map[string]string) RunOption { return func(c *runConfig) { c.info.Metadata = md } }

// WithStore writes the session's run to st as it happens: the spec and
// input, every model call and tool call, every event and the Result. A non-idempotent tool call's intent is committed
// before the call runs, so that a resume never repeats it blindly. A
// store that fails mid-run stops the run (ErrStore).
func WithStore(st store.Store) RunOption { return func(c *runConfig) { c.store = st } }

// WithToolChoice says which tool the run's model must call: "required"
// (one of its tools) or a tool's name on the run's first model call, the
// turns after it left to the model (a model made to call a tool every
// turn would never answer); "none" on every call (the run answers without
// its tools); "auto" or "" leaves it to the model. For a caller that
// wants a call of a tool it runs itself (spec caller_tools) made at once.
func WithToolChoice(choice string) RunOption {
	return func(c *runConfig) { c.more().toolChoice = choice }
}

// WithInstructions gives the run a caller's instructions: a system
// message after the agent's own system prompt (which stands), before
// the spec's messages and any history. They are this run's: the next run
// of its conversation does not start from them. A resume and a replay
// send them again (the run's start record keeps them).
func WithInstructions(text string) RunOption {
	return func(c *runConfig) { c.more().instructions = text }
}

// WithLimits tightens the spec's budgets for this run (Noema's
// context.budget): MaxTurns, TimeoutMS, MaxTotalTokens, MaxCostUSD and
// MaxToolCalls each replace the spec's when lower; zero fields add
// nothing. The other limits (per-call timeouts, parallelism,
// observation size) are the agent's, set by its spec.
func WithLimits(l spec.Limits) RunOption { return func(c *runConfig) { c.more().limits = &l } }

// check refuses run options that do not go together, or a trace or run
// id that is malformed.
func (c *runConfig) check() error {
	if tp := c.info.TraceParent; tp != "" {
		if _, err := traceIDOf(tp); err != nil {
			return fmt.Errorf("%w: %v", ErrConfig, err)
		}
	} else if id := c.info.TraceID; id != "" {
		if err := checkTraceID(id); err != nil {
			return fmt.Errorf("%w: %v", ErrConfig, err)
		}
	}
	if ts := c.info.TraceState; ts != "" {
		if c.info.TraceParent == "" && c.info.TraceID == "" {
			return fmt.Errorf("%w: tracestate %q without a traceparent: W3C trace context reads it only beside one", ErrConfig, ts)
		}
		if _, err := oteltrace.ParseTraceState(ts); err != nil {
			return fmt.Errorf("%w: tracestate %q: %v", ErrConfig, ts, err)
		}
	}
	if err := c.checkConversation(); err != nil {
		return err
	}
	if e := c.extra; e != nil {
		if e.dispatch && c.store == nil {
			return fmt.Errorf("%w: Dispatch needs a store (WithStore): a dispatched run goes on from its log", ErrConfig)
		}
		if len(e.answers) > 0 && c.resume == nil {
			return fmt.Errorf("%w: CallerResult gives the results of calls a stored run handed back to its caller; give it to Resume", ErrConfig)
		}
		if len(e.results) > 0 && c.resume == nil {
			return fmt.Errorf("%w: WithResults gives the results of dispatched calls to Resume", ErrConfig)
		}
		if e.runIDSet {
			if err := checkRunID(e.runID); err != nil {
				return err
			}
		}
	}
	if len(c.decisions) > 0 && c.resume == nil {
		return fmt.Errorf("%w: Approve and Deny decide the calls a stored run waits for; give them to Resume", ErrNoSuchCall)
	}
	return nil
}

// ids are the session's and the run's ids: seeded (a deterministic
// run), given (drive.Plan.RunID, WithSessionID), or new.
func (c *runConfig) ids(a *Agent, parent string, input map[string]any) (id, runID string) {
	switch {
	case c.extra != nil && c.extra.seedIDs:
		seed := idSeed(c.extra.seed, a, parent, input)
		id, runID = ids.Seeded("ses", seed), ids.Seeded("run", seed)
		if c.info.SessionID != "" {
			id = c.info.SessionID
		}
	case c.extra != nil && c.extra.runID != "":
		id, runID = c.info.SessionID, c.extra.runID
		if id == "" {
			id = ids.New("ses")
		}
	case c.info.SessionID != "":
		id, runID = c.info.SessionID, ids.New("run")
	default:
		id, runID = ids.Two("ses", "run")
	}
	return id, runID
}

// idSeed is what a seeded run's ids derive from: the seed, the agent, the
// run it is part of and its input. The same run given the same seed has
// the same ids; another agent, input or parent (a pipeline's stages, a
// sub-agent) has others.
func idSeed(seed int64, a *Agent, parent string, input map[string]any) int64 {
	in, _ := json.Marshal(input) // map keys sorted: one text per input
	return ids.Derive(seed, a.spec.AgentName, a.spec.Version, parent, string(in))
}

// Settings is what a list of run options sets that a runner of several
// runs reports for all of them: a pipeline's own events carry the trace
// id its stages do, and follow their clock.
type Settings struct {
	// TraceID is the runs' trace id (WithTraceContext's),
	// or "".
	TraceID string
	// TraceParent and TraceState are the caller's W3C trace context
	// (WithTraceContext), or "".
	TraceParent, TraceState string
	// Seed is the caller's seed (WithSeed), or nil.
	Seed *int64
	// Now is the runs' fixed clock (WithNow), or the zero time.
	Now time.Time
}

// SettingsOf returns what opts set: the trace id as a run given them
// would carry it, the caller's seed and clock. A spec's own seed is the
// agent's, not the options', and is not among them.
func SettingsOf(opts ...RunOption) Settings {
	var c runConfig
	for _, o := range opts {
		o(&c)
	}
	return c.settings()
}

// settings is what c sets, as SettingsOf reports it.
func (c *runConfig) settings() Settings {
	var s Settings
	s.TraceID, s.TraceParent, s.TraceState = c.info.TraceID, c.info.TraceParent, c.info.TraceState
	if tp := c.info.TraceParent; tp != "" {
		s.TraceID, _ = traceIDOf(tp)
	}
	if e := c.extra; e != nil {
		if e.seedIDs {
			seed := e.seed
			s.Seed = &seed
		}
		s.Now = e.now
	}
	return s
}
