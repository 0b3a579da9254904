package agent

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/agentry/agentry/event"
	"github.com/agentry/agentry/internal/ids"
	"github.com/agentry/agentry/llm"
	"github.com/agentry/agentry/prompt"
	"github.com/agentry/agentry/runlog"
	"github.com/agentry/agentry/schema"
	"github.com/agentry/agentry/spec"
	"github.com/agentry/agentry/store"
	"github.com/agentry/agentry/tool"
)

// State is everything a session knows, as plain data that serialises to
// JSON: what Session.State returns and planners read. It is not a
// checkpoint: a run is resumed from its run log, which records how the
// state came to be, turn by turn.
type State struct {
	SessionID      string             `json:"session_id"`
	RunID          string             `json:"run_id"`
	ParentRunID    string             `json:"parent_run_id,omitempty"`
	AgentName      string             `json:"agent_name"`
	AgentVersion   string             `json:"agent_version"`
	Input          map[string]any     `json:"input"`
	Turn           int                `json:"turn"`
	Messages       []llm.Message      `json:"messages"`
	Steps          []Step             `json:"steps"`
	ToolsUsed      []string           `json:"tools_used"`
	Usage          llm.Usage          `json:"usage"`
	CostUSD        float64            `json:"cost_usd"`
	ToolCalls      int                `json:"tool_calls"`
	ToolErrors     int                `json:"tool_errors"`
	ParseErrors    int                `json:"parse_errors,omitempty"`
	ModelCalls     []ModelCall        `json:"model_calls"`
	ModelLatencyMS float64            `json:"model_latency_ms"`
	ToolLatencyMS  map[string]float64 `json:"tool_latency_ms,omitempty"`
	LastContent    string             `json:"last_content,omitempty"`
	// Model is the model that answered last, as the provider reported it.
	Model string `json:"model,omitempty"`
	// Handoffs are the agents the conversation was handed to, in order.
	Handoffs []string `json:"handoffs,omitempty"`
	// Provider is the provider that answered last, when a router chose it.
	Provider  string    `json:"provider,omitempty"`
	StartedAt Timestamp `json:"started_at"`
}

// RunOption configures a session.
type RunOption func(*runConfig)

type runConfig struct {
	onEvent      []listener
	bus          *event.Bus
	provider     llm.Provider
	parent       *link
	parentBudget *tool.Budget
	limits       *spec.Limits // WithLimits; a pointer keeps the session small
	store        store.Store
	resume       *resumeConfig
	decisions    map[string]bool // Approve (true) and Deny (false), by key once Resume bound them
	// info is what tools see of the run: the options set who runs it,
	// Run the rest (setRunInfo).
	info tool.Run
	// extra holds what few runs are given: nil for most (a session's
	// size is what a paused run costs).
	extra *runExtra
}

// runExtra is the rarely given part of a session's options.
type runExtra struct {
	denyReason string    // why the denied calls were denied (WithDenyReason)
	decidedBy  string    // who approved or denied them (DecidedBy)
	liveTools  bool      // a replay runs safe and idempotent tools again
	seeded     bool      // WithSeed, or the spec's seed
	seedIDs    bool      // WithSeed: the run's ids derive from the seed too
	seed       int64     // what ids and randomness derive from
	now        time.Time // WithNow: the run's clock, which does not move
	images     []llm.Image
	runID      string // WithRunID
	runIDSet   bool
	driver     string                       // DrivenBy
	dispatch   bool                         // Dispatch
	results    map[string]runlog.ToolResult // WithResults
	deadline   time.Time                    // WithDeadline
	ranThrough int                          // RanThrough
	ranSet     bool
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

// WithTraceParent sets the W3C trace context ("00-TRACEID-SPANID-FLAGS")
// the run belongs to.
func WithTraceParent(tp string) RunOption { return func(c *runConfig) { c.info.TraceParent = tp } }

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

// WithTraceID sets the run's trace id (32 hex digits), for a caller that
// has a trace id but no parent span: the run's traceparent is made from
// it. On every event, in the Result and in log records; sent to model
// providers and http_request as traceparent.
func WithTraceID(id string) RunOption { return func(c *runConfig) { c.info.TraceID = id } }

// WithMetadata gives tools the caller's metadata (tool.CallFrom).
func WithMetadata(md map[string]string) RunOption { return func(c *runConfig) { c.info.Metadata = md } }

// WithStore writes the session's run to st as it happens (DESIGN.md
// 3.7): the spec and input, every model call and tool call, every event
// and the Result. A non-idempotent tool call's intent is committed
// before the call runs, so that a resume never repeats it blindly. A
// store that fails mid-run stops the run (ErrStore).
func WithStore(st store.Store) RunOption { return func(c *runConfig) { c.store = st } }

// WithLimits tightens the spec's budgets for this run (Noema's
// context.budget): MaxTurns, TimeoutMS, MaxTotalTokens, MaxCostUSD and
// MaxToolCalls each replace the spec's when lower; zero fields add
// nothing. The other limits (per-call timeouts, parallelism,
// observation size) are the agent's, set by its spec.
func WithLimits(l spec.Limits) RunOption { return func(c *runConfig) { c.limits = &l } }

// InputError reports input that does not fit the agent.
type InputError struct {
	Agent    string
	Problems []string
}

func (e *InputError) Error() string {
	return fmt.Sprintf("input for agent %s: %s", e.Agent, strings.Join(e.Problems, "; "))
}

// Is makes errors.Is(err, ErrInvalidInput) true.
func (e *InputError) Is(target error) bool { return target == ErrInvalidInput }

// Session is one run of an agent, with its own state. Run it once; Abort
// may be called from any goroutine.
type Session struct {
	agent    *Agent
	bus      event.Bus // in the session: no allocation of its own
	provider llm.Provider
	planner  Planner
	cfg      runConfig
	svc      *Service // the service that created it, if any

	mu      sync.Mutex
	state   State
	started bool
	aborted bool
	// afterLog is how a resumed session aborted (or out of time) before
	// it ran ends, once it went through its log, so that its Result holds
	// the run so far: at the first thing it would do anew (afterLogEnds;
	// 0: it goes on). A byte: a session's size is what a paused run costs.
	afterLog uint8
	cancel   context.CancelCauseFunc

	run run // the state of Run beyond State
}

// NewSession checks input against the agent (input_keys, input_schema, the
// ${var}s of its prompts) and prepares a session. A mismatch is an
// *InputError naming each problem.
func (a *Agent) NewSession(input map[string]any, opts ...RunOption) (*Session, error) {
	s := &Session{agent: a, provider: a.provider, planner: a.planner}
	c := &s.cfg
	for _, o := range opts {
		o(c)
	}
	if tp := c.info.TraceParent; tp != "" {
		if _, err := traceIDOf(tp); err != nil {
			return nil, fmt.Errorf("%w: %v", ErrConfig, err)
		}
	} else if id := c.info.TraceID; id != "" {
		if err := checkTraceID(id); err != nil {
			return nil, fmt.Errorf("%w: %v", ErrConfig, err)
		}
	}
	if e := c.extra; e != nil {
		if e.dispatch && c.store == nil {
			return nil, fmt.Errorf("%w: Dispatch needs a store (WithStore): a dispatched run goes on from its log", ErrConfig)
		}
		if len(e.results) > 0 && c.resume == nil {
			return nil, fmt.Errorf("%w: WithResults gives the results of dispatched calls to Resume", ErrConfig)
		}
		if e.runIDSet {
			if err := checkRunID(e.runID); err != nil {
				return nil, err
			}
		}
	}
	if len(c.decisions) > 0 && c.resume == nil {
		return nil, fmt.Errorf("%w: Approve and Deny decide the calls a stored run waits for; give them to Resume", ErrNoSuchCall)
	}
	if input == nil {
		input = map[string]any{}
	}
	msgs, err := a.initialMessages(input)
	if err != nil {
		return nil, err
	}
	if c.extra != nil && len(c.extra.images) > 0 {
		if err := attachImages(msgs, c.extra.images); err != nil {
			return nil, err
		}
	}
	s.bus.Init(c.bus)
	if c.provider != nil {
		s.provider = a.sessionChain(c.provider, c.store != nil)
	}
	for i := range c.onEvent {
		l := &c.onEvent[i]
		l.unsub = s.bus.Subscribe(l.fn, l.opts...)
	}
	if c.extra == nil || !c.extra.seeded {
		if seed := a.spec.Seed; seed != nil {
			e := c.more()
			e.seeded, e.seed = true, *seed
		}
	}
	parent := c.info.ParentRunID
	if c.parent != nil {
		parent = c.parent.run.st.RunID
	}
	var id, runID string
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
	s.state = State{SessionID: id, RunID: runID, ParentRunID: parent,
		AgentName: a.spec.AgentName, AgentVersion: a.spec.Version, Input: input, Messages: msgs}
	return s, nil
}

// setRunInfo fills in what tools see of the run.
func (s *Session) setRunInfo() {
	ri := &s.cfg.info
	ri.RunID, ri.SessionID, ri.ParentRunID = s.state.RunID, s.state.SessionID, s.state.ParentRunID
	ri.AgentName, ri.AgentVersion = s.state.AgentName, s.state.AgentVersion
	if ri.TraceParent != "" {
		ri.TraceID, _ = traceIDOf(ri.TraceParent)
	} else if ri.TraceID != "" {
		ri.TraceParent = "00-" + ri.TraceID + "-" + spanID(s.state.RunID) + "-01"
	}
}

// traceIDOf is the trace id of a W3C traceparent, checked.
func traceIDOf(tp string) (string, error) {
	parts := strings.Split(tp, "-")
	if len(parts) != 4 || len(parts[0]) != 2 || len(parts[2]) != 16 || len(parts[3]) != 2 || !isHex(parts[0]+parts[2]+parts[3]) {
		return "", fmt.Errorf("traceparent %q: want 00-TRACEID-SPANID-FLAGS (W3C trace context)", tp)
	}
	if err := checkTraceID(parts[1]); err != nil {
		return "", err
	}
	return parts[1], nil
}

// checkTraceID refuses what is not a W3C trace id: 32 lowercase hex
// digits, not all zero.
func checkTraceID(id string) error {
	if len(id) != 32 || !isHex(id) || strings.Trim(id, "0") == "" {
		return fmt.Errorf("trace id %q: want 32 lowercase hex digits, not all zero", id)
	}
	return nil
}

func isHex(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}

// spanID is the run's span id in its trace: derived from the run id, so
// that a replay or a resume of the run names the same span.
func spanID(runID string) string {
	sum := sha256.Sum256([]byte(runID))
	return hex.EncodeToString(sum[:8])
}

// Run runs the agent with input in a new session: NewSession then
// Session.Run. Input that does not fit the agent returns a Result too
// (success false, error code validation_error naming each problem)
// with the *InputError.
func (a *Agent) Run(ctx context.Context, input map[string]any, opts ...RunOption) (*Result, error) {
	s, err := a.NewSession(input, opts...)
	if err != nil {
		if ie := (*InputError)(nil); errors.As(err, &ie) {
			return a.refused(ie, input, opts), err
		}
		return nil, err
	}
	return s.Run(ctx)
}

// refused is the Result of a run its input kept from starting: every
// run returns a Result (DESIGN.md 3.2), a complete one with empty lists.
// It follows the run's options: a seeded run's ids, a fixed clock, the
// trace id.
func (a *Agent) refused(ie *InputError, input map[string]any, opts []RunOption) *Result {
	var c runConfig
	for _, o := range opts {
		o(&c)
	}
	set := c.settings()
	sessionID, runID := ids.Two("ses", "run")
	if set.Seed != nil {
		seed := idSeed(*set.Seed, a, c.info.ParentRunID, input)
		sessionID, runID = ids.Seeded("ses", seed), ids.Seeded("run", seed)
	}
	now := Timestamp{time.Now()}
	if !set.Now.IsZero() {
		now.Time = set.Now
	}
	end := endingOf(ie)
	res := &Result{ID: runID, SessionID: sessionID, AgentName: a.spec.AgentName, AgentVersion: a.spec.Version, TraceID: set.TraceID,
		Outcome: end.outcome, TerminateReason: end.reason, StartedAt: now, FinishedAt: now,
		Steps: []Step{}, Messages: []llm.Message{}, ToolsUsed: []string{}, ModelCalls: []ModelCall{},
		Model: a.model, Provider: a.providerName, Metrics: Metrics{ToolLatencyMS: map[string]float64{}},
		Error: &ErrorInfo{Code: end.code, Message: ie.Error(), Recoverable: end.recoverable,
			Details: map[string]any{"problems": ie.Problems}}}
	res.EstimatedCost = &res.cost
	res.Seed, res.Deterministic = set.Seed, set.Seed != nil && !set.Now.IsZero()
	redactResult(res, a.redact)
	res.Decision = decision(res)
	return res
}

// ID returns the session's id.
func (s *Session) ID() string { return s.state.SessionID }

// RunID returns the id of the session's run.
func (s *Session) RunID() string { return s.state.RunID }

// Abort stops the session's run as soon as possible; the run ends with
// terminate_reason "aborted" and a partial result. Aborting a session
// before it runs makes Run return at once; a resumed one first goes
// through its log (nothing runs again), so that its Result holds what
// the run did.
func (s *Session) Abort() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.aborted = true
	if s.cancel != nil {
		s.cancel(ErrAborted)
	}
}

// Interrupt stops the session's run as soon as possible without ending
// it: a durable run's log keeps what it did, unended, and the store
// reports it interrupted, for Resume to finish (in this process or
// another). Run returns ErrInterrupted. A host that shuts down interrupts
// the runs it cannot wait for.
func (s *Session) Interrupt() { s.stop(ErrInterrupted) }

// stop ends the session's run with cause, as Abort does with ErrAborted.
func (s *Session) stop(cause error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cancel != nil {
		s.cancel(cause)
	}
}

// State returns a copy of the session's state. Call it when the session is
// not running (before Run, or after it returned).
func (s *Session) State() State {
	s.mu.Lock()
	defer s.mu.Unlock()
	st := s.state
	st.Messages = slices.Clone(st.Messages)
	st.Steps = slices.Clone(st.Steps)
	st.ToolsUsed = slices.Clone(st.ToolsUsed)
	st.ModelCalls = slices.Clone(st.ModelCalls)
	return st
}

func (a *Agent) initialMessages(input map[string]any) ([]llm.Message, error) {
	var probs []string
	for _, k := range a.spec.InputKeys {
		if _, ok := input[k]; !ok {
			probs = append(probs, fmt.Sprintf("missing input key %q", k))
		}
	}
	if a.inputSchema != nil {
		if err := a.inputSchema.Validate(jsonValue(input)); err != nil {
			var ve *schema.ValidationError
			if errors.As(err, &ve) {
				probs = append(probs, ve.Strings()...)
			} else {
				probs = append(probs, err.Error())
			}
		}
	}
	msgs, more := modes[a.spec.Mode].messages(a, input)
	probs = append(probs, more...)
	if len(a.spec.Messages) > 0 {
		var hist []string
		msgs, hist = a.withHistory(msgs, input)
		probs = append(probs, hist...)
	}
	_, cprobs := constraintsOf(input)
	probs = append(probs, cprobs...)
	if len(probs) > 0 {
		return nil, &InputError{Agent: a.spec.AgentName, Problems: probs}
	}
	return msgs, nil
}

// composedMessages are the neutral AgentPrompt of the structured modes.
func composedMessages(a *Agent, input map[string]any) ([]llm.Message, []string) {
	msgs, _, err := a.prompt.Compose(input)
	if err != nil {
		return nil, []string{err.Error()}
	}
	return msgs, nil
}

// toolsMessages are the system prompt (system_text, then purpose_text) and
// the first user message (user_text, or the input as key = "value" lines).
func toolsMessages(a *Agent, input map[string]any) ([]llm.Message, []string) {
	var probs []string
	system, err1 := a.systemText(input)
	purpose, err2 := prompt.Render("purpose_text", a.spec.PurposeText, input)
	user, err3 := prompt.Render("user_text", a.spec.UserText, input)
	for _, err := range []error{err1, err2, err3} {
		if err != nil {
			probs = append(probs, err.Error())
		}
	}
	if purpose != "" {
		if system != "" {
			system += "\n\n"
		}
		system += purpose
	}
	if user == "" {
		user = prompt.InputLines(input, a.spec.InputKeys)
	}
	if user == "" {
		user = "Begin."
	}
	msgs := make([]llm.Message, 0, max(hint(&a.sizes.messages), 2))
	if system != "" {
		msgs = append(msgs, llm.Message{Role: llm.RoleSystem, Content: system})
	}
	msgs = append(msgs, a.examples()...)
	return append(msgs, llm.Message{Role: llm.RoleUser, Content: user}), probs
}

// withHistory puts the spec's initial messages after the system prompt
// and before the task, their ${var}s filled from the input.
func (a *Agent) withHistory(msgs []llm.Message, input map[string]any) ([]llm.Message, []string) {
	var probs []string
	at := 0
	for at < len(msgs) && msgs[at].Role == llm.RoleSystem {
		at++
	}
	hist := make([]llm.Message, len(a.spec.Messages))
	for i, m := range a.spec.Messages {
		text, err := prompt.Render(fmt.Sprintf("messages[%d]", i), m.Content, input)
		if err != nil {
			probs = append(probs, err.Error())
		}
		m.Content = text
		m.ToolCalls = slices.Clone(m.ToolCalls)
		if m.Media != nil { // the run's own: a caller who edits it does not edit the agent
			media := llm.Media{Images: slices.Clone(m.Media.Images)}
			for j := range media.Images {
				media.Images[j].Data = bytes.Clone(media.Images[j].Data)
			}
			m.Media = &media
		}
		hist[i] = m
	}
	out := make([]llm.Message, 0, len(msgs)+len(hist))
	out = append(append(append(out, msgs[:at]...), hist...), msgs[at:]...)
	return out, probs
}

// attachImages puts images on the last user message of msgs, the task.
func attachImages(msgs []llm.Message, images []llm.Image) error {
	for i, im := range images {
		switch {
		case im.URL == "" && len(im.Data) == 0:
			return fmt.Errorf("%w: WithImages: image %d has neither a URL nor bytes", ErrConfig, i)
		case im.URL == "" && !strings.HasPrefix(im.MIMEType, "image/"):
			return fmt.Errorf("%w: WithImages: image %d's bytes need an image/ MIME type, not %q", ErrConfig, i, im.MIMEType)
		}
	}
	for i := len(msgs) - 1; i >= 0; i-- {
		if msgs[i].Role == llm.RoleUser {
			media := &llm.Media{Images: slices.Clone(msgs[i].Images())}
			media.Images = append(media.Images, images...)
			msgs[i].Media = media
			return nil
		}
	}
	return fmt.Errorf("%w: WithImages: the agent's prompt has no user message to carry them", ErrConfig)
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
	// TraceID is the runs' trace id (WithTraceID, or WithTraceParent's),
	// or "".
	TraceID string
	// TraceParent is the caller's W3C trace context (WithTraceParent), or "".
	TraceParent string
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
	s.TraceID, s.TraceParent = c.info.TraceID, c.info.TraceParent
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
