package agent

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/agentry/agentry/event"
	"github.com/agentry/agentry/internal/ids"
	"github.com/agentry/agentry/internal/telemetry"
	"github.com/agentry/agentry/llm"
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

	mu     sync.Mutex
	state  State
	cancel context.CancelCauseFunc

	// run is the state of Run beyond State; its last word holds the
	// session's flags too (started, aborted, afterLog), where they cost
	// no padding: a session's size is what a paused run costs.
	run run
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
	if err := c.check(); err != nil {
		return nil, err
	}
	if err := a.checkToolChoice(c); err != nil {
		return nil, err
	}
	if len(a.spec.CallerTools) > 0 && c.store == nil {
		return nil, fmt.Errorf("%w: agent %s hands calls of its caller_tools back, and goes on when given their results: its runs need a store (WithStore)", ErrConfig, a.spec.AgentName)
	}
	if c.provider == nil && (a.readiers != nil || a.subs != nil) {
		if err := a.Ready(); err != nil {
			return nil, err
		}
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
	if c.extra != nil && c.extra.instructions != "" {
		msgs = instructed(msgs, c.extra.instructions)
	}
	s.bus.Init(c.bus)
	if c.provider != nil {
		s.provider = a.sessionChain(c.provider, c.store != nil)
	} else if p := a.freshScript(); p != nil && c.info.ParentRunID == "" && c.parent == nil {
		s.provider = a.sessionChain(p, c.store != nil)
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
	id, runID := c.ids(a, parent, input)
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

// traceIDOf is the trace id of a W3C traceparent, checked as
// OpenTelemetry's propagator reads it.
func traceIDOf(tp string) (string, error) {
	sc, ok := telemetry.Parse(tp, "")
	if !ok {
		return "", fmt.Errorf("traceparent %q: want 00-TRACEID-SPANID-FLAGS (W3C trace context), its ids not all zero", tp)
	}
	return sc.TraceID().String(), nil
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
// run returns a Result, a complete one with empty lists.
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
	redactResult(res, a.redact, [2]int{})
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
	s.run.aborted = true
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
