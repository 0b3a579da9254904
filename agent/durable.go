package agent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strings"

	"github.com/agentry/agentry/event"
	"github.com/agentry/agentry/internal/journal"
	"github.com/agentry/agentry/llm"
	"github.com/agentry/agentry/runlog"
	"github.com/agentry/agentry/spec"
	"github.com/agentry/agentry/store"
)

// resumeConfig is how a session continues a stored run.
type resumeConfig struct {
	log       *runlog.Log
	holder    string // the lease Resume took
	replay    bool   // nothing is written; calls the log lacks are differences
	liveTools bool   // a replay runs safe and idempotent tools again
}

// Approve lets a resumed run go on with the calls it paused on: a call
// the approval rule held back runs, a non-idempotent call of unknown
// outcome is sent again with its same key. Each id is a call's
// idempotency key (RUN:TURN:INDEX), or the model's call id when it names
// exactly one waiting call. Only Resume takes it.
func Approve(callIDs ...string) RunOption {
	return func(c *runConfig) { c.decide(callIDs, true) }
}

// Deny answers the calls a resumed run paused on (named as for Approve)
// without running them: a non-idempotent call of unknown
// outcome with an "unknown_outcome" error for the model, a call waiting
// for approval (the policy's approval rule) with a policy_violation.
func Deny(callIDs ...string) RunOption {
	return func(c *runConfig) { c.decide(callIDs, false) }
}

// WithDenyReason says why the calls Deny names are denied: the model is
// told, and the audit log keeps it.
func WithDenyReason(reason string) RunOption {
	return func(c *runConfig) { c.more().denyReason = reason }
}

// DecidedBy names who approved or denied the calls Approve and Deny name
// (a person, a key's name): the audit records of those decisions carry it
// as their user, where they would carry the run's.
func DecidedBy(name string) RunOption {
	return func(c *runConfig) { c.more().decidedBy = name }
}

// decider is who decided the call with key, when a resume decided it:
// DecidedBy's name, else the run's user.
func (r *run) decider(key string) (string, bool) {
	c := &r.s.cfg
	if _, ok := c.decisions[key]; !ok {
		return "", false
	}
	if c.extra != nil && c.extra.decidedBy != "" {
		return c.extra.decidedBy, true
	}
	return r.info.UserID, true
}

func (c *runConfig) decide(ids []string, approve bool) {
	if c.decisions == nil {
		c.decisions = map[string]bool{}
	}
	for _, id := range ids {
		c.decisions[id] = approve
	}
}

// openJournal makes the run durable when the session has a store: it
// creates the run (or takes over the resumed one), and subscribes the
// writer of its events. A replay writes nothing: its journal only
// serves the log.
func (s *Session) openJournal(ctx context.Context, r *run) (*runJournal, error) {
	c := &s.cfg
	if c.store == nil {
		return nil, nil
	}
	e := c.extra
	if e == nil {
		e = &runExtra{}
	}
	// The span, opened first, decided with the same key before it gave
	// the run a trace id of its own: a run it traces is sampled.
	if c.resume == nil && !e.dispatch && len(s.agent.spec.CallerTools) == 0 && r.otel == nil && !s.agent.spec.Tracing.Records(s.traceKey()) {
		// Not sampled (spec tracing): the run is not recorded, but its
		// version is still pinned and its policy decisions still audited.
		return nil, s.agent.pin(ctx, c.store)
	}
	j := &runJournal{r: r}
	if e.dispatch {
		j.out = &dispatched{}
	}
	write := true
	if rc := c.resume; rc != nil {
		// What earlier resumes decided holds, unless decided anew: a run
		// resumed again replays the calls they decided.
		for key, ok := range rc.log.Decided {
			if _, anew := c.decisions[key]; !anew {
				c.decide([]string{key}, ok)
			}
		}
		if c.denyReason() == "" && rc.log.DenyReason != "" {
			c.more().denyReason = rc.log.DenyReason
		}
		j.log, write, j.liveMode = rc.log, !rc.replay, rc.liveTools
		j.approve, j.deny = map[string]bool{}, map[string]bool{}
		for key, ok := range c.decisions {
			if ok {
				j.approve[key] = true
			} else {
				j.deny[key] = true
			}
		}
		r.st.StartedAt = Timestamp{rc.log.Start.StartedAt}
		if write {
			j.quiet = max(rc.log.LastTurn, 1)
			j.supplied = e.results
			if t := suppliedTurn(e.results); t > 0 && !waits(rc.log, e.results) {
				// The run stopped after turn t to have its calls run: that
				// turn is on record up to their ends, which are told now.
				j.quiet, j.tailTurn = t+1, t
			}
		}
	}
	if write {
		if err := j.begin(ctx, s); err != nil {
			return nil, err
		}
		// Events join the batch as they are published, so that a commit
		// holds every event before it. Whole replies are on record in the
		// model calls: their pieces would only grow the log, and make the
		// run stream.
		j.unsub = s.bus.Subscribe(j.w.Event, event.Inline(), event.Except(event.ContentChunk))
	}
	r.link.journal = j
	return j, nil
}

// waits reports whether a call of the log waits (for a person, or with
// an unknown outcome) and was given no result: a resume then goes
// through its turn again, as after any pause for approval, its events
// written anew.
func waits(l *runlog.Log, results map[string]runlog.ToolResult) bool {
	for key := range l.Waiting() {
		if _, given := results[key]; !given {
			return true
		}
	}
	return false
}

// Stored builds the agent a stored run ran: the spec as it ran (not as
// its file reads now), with the run's model and directories. opts come
// after them: WithModel gives the rest of the run another model,
// WithTools the tools its spec names.
func Stored(ctx context.Context, st store.Store, runID string, opts ...Option) (*Agent, error) {
	var o options
	for _, opt := range opts {
		opt(&o)
	}
	seal, err := logSealer(o.memoryKey)
	if err != nil {
		return nil, err
	}
	l, err := readAgentLog(ctx, st, runID, seal)
	if err != nil {
		return nil, err
	}
	var sp spec.Spec
	if err := json.Unmarshal(l.Start.Spec, &sp); err != nil {
		return nil, fmt.Errorf("run %s: its spec: %w", l.Start.RunID, err)
	}
	base := []Option{WithBaseDir(l.Start.BaseDir)}
	if l.Start.AgentsDir != "" {
		base = append(base, WithAgents(spec.Dir{Path: l.Start.AgentsDir}))
	}
	if l.Start.Model != "" {
		base = append(base, WithModel(l.Start.Model))
	}
	return New(&sp, append(base, opts...)...)
}

// readAgentLog reads the log of runID, refusing a run that is not an
// agent's (a pipeline's).
func readAgentLog(ctx context.Context, st store.Store, runID string, seal *runlog.Sealer) (*runlog.Log, error) {
	var opts []runlog.Option
	if seal != nil {
		opts = append(opts, runlog.Sealed(seal))
	}
	l, err := runlog.Read(ctx, st, runID, opts...)
	if err != nil {
		return nil, err
	}
	if l.Start.Kind != "agent" {
		return nil, fmt.Errorf("%w: run %s is a %s's, not an agent's", ErrNotResumable, runID, l.Start.Kind)
	}
	return l, nil
}

// Resume returns a session that continues the stored run runID, which
// must be interrupted (its process died) or awaiting approval. a must
// be the agent the run ran (see Stored). The session takes the run's
// lease at once: a run another live process holds is refused with an
// error matching store.ErrHeld.
//
// Its Run rebuilds the session from the log, then goes on: recorded
// model turns are not asked again and recorded tool results are not run
// again; a safe or idempotent call without a result runs again; a
// non-idempotent call sent without a recorded result is sent again with
// its key when its tool deduplicates, else the run pauses
// (ErrAwaitingApproval) until Approve or Deny decides it. A scripted
// model plays on from the turn after the last recorded call.
func (a *Agent) Resume(ctx context.Context, st store.Store, runID string, opts ...RunOption) (*Session, error) {
	var c runConfig
	for _, o := range opts {
		o(&c)
	}
	driver := ""
	if c.extra != nil {
		driver = c.extra.driver
	}
	if driver != "" {
		// An earlier holder of the same driver (a task that timed out, or
		// is still running somewhere) is fenced off before the log is
		// read: it can write nothing this session would not see.
		if run, err := st.Get(ctx, runID); err == nil && journal.OwnedBy(run.Holder, driver) {
			if err := st.Break(ctx, runID, run.Holder); err != nil && !errors.Is(err, store.ErrLeaseLost) {
				return nil, err
			}
		}
	}
	l, err := readAgentLog(ctx, st, runID, a.logSeal)
	if err != nil {
		return nil, err
	}
	if l.Start.Driver != driver {
		if l.Start.Driver == "" {
			return nil, fmt.Errorf("%w: run %s was not started by %s", ErrNotResumable, runID, driver)
		}
		return nil, fmt.Errorf("%w: run %s is driven by %s: resume, approve or deny it there", ErrNotResumable, runID, l.Start.Driver)
	}
	var as []journal.Option
	if driver != "" {
		as = append(as, journal.HeldAs(journal.DriverHolder(driver)))
	}
	holder, err := journal.TakeOver(ctx, st, &l.Run, as...)
	if err != nil {
		return nil, err
	}
	s, err := a.resumeSession(st, l, holder, opts)
	if err != nil {
		// Refused: the run is free for another process at once, not when
		// the lease runs out.
		journal.Release(ctx, st, runID, holder)
		return nil, err
	}
	return s, nil
}

// resumeSession is the session that continues the run l logs, whose
// lease holder took.
func (a *Agent) resumeSession(db store.Store, l *runlog.Log, holder string, opts []RunOption) (*Session, error) {
	if a.spec.Policy != nil && len(a.spec.Policy.PrivateTools) > 0 {
		return nil, fmt.Errorf("%w: run %s's log keeps digests of its private tools' inputs and outputs (policy.private_tools), not the texts a resumed run would show the model again; replay it instead",
			ErrNotResumable, l.Start.RunID)
	}
	if l.Start.Spec != nil && a.spec.AgentName != "" {
		var sp struct {
			Name string `json:"agent_name"`
		}
		if json.Unmarshal(l.Start.Spec, &sp) == nil && sp.Name != a.spec.AgentName {
			return nil, fmt.Errorf("%w: run %s is agent %s's, not %s's", ErrNotResumable, l.Start.RunID, sp.Name, a.spec.AgentName)
		}
	}
	pre := append(startedAs(db, l), func(c *runConfig) { c.resume = &resumeConfig{log: l, holder: holder} })
	if p := a.playOn(l); p != nil {
		pre = append(pre, WithSessionProvider(p))
	}
	s, err := a.NewSession(l.Start.Input, append(pre, opts...)...)
	if err != nil {
		return nil, err
	}
	if s.cfg.decisions, err = bindDecisions(l, s.cfg.decisions); err != nil {
		return nil, err
	}
	if err := refuseCallerApprovals(l, s.cfg.decisions); err != nil {
		return nil, err
	}
	if e := s.cfg.extra; e != nil && len(e.answers) > 0 {
		if e.results == nil {
			e.results = map[string]runlog.ToolResult{}
		}
		if err := bindAnswers(l, e.answers, e.results); err != nil {
			return nil, err
		}
	}
	s.state.RunID = l.Start.RunID
	return s, nil
}

// startedAs are the options of the session a stored run started as: its
// ids, user, metadata and store.
func startedAs(db store.Store, l *runlog.Log) []RunOption {
	st := &l.Start
	opts := []RunOption{WithSessionID(st.SessionID), WithStore(db), WithUser(st.UserID),
		WithCorrelationID(st.CorrelationID), WithTraceContext(st.TraceParent, st.TraceState), WithMetadata(st.Metadata),
		WithParentRunID(st.ParentRunID)}
	if st.Seed != nil {
		opts = append(opts, WithSeed(*st.Seed))
	}
	if st.FixedClock {
		opts = append(opts, WithNow(st.StartedAt)) // a deterministic run stays one
	}
	if len(st.Images) > 0 {
		opts = append(opts, WithImages(st.Images...))
	}
	if st.Instructions != "" {
		opts = append(opts, WithInstructions(st.Instructions))
	}
	if st.Conversation != "" || len(st.History) > 0 { // it goes on from the history it started from
		opts = append(opts, func(c *runConfig) {
			e := c.more()
			e.conversation, e.history, e.historySet, e.historyCalls = st.Conversation, st.History, true, st.HistoryAttempts
		})
	}
	return opts
}

// bindDecisions binds each decision given (by idempotency key, or by the
// model's call id) to the one waiting call it names, by that call's key:
// call ids repeat across turns (a provider may number its calls afresh
// each turn), so a decision is never looked up by call id, and never
// applies to a call that was not waiting when it was given. A mistyped
// id, or a call id that names several waiting calls, is refused.
func bindDecisions(l *runlog.Log, decisions map[string]bool) (map[string]bool, error) {
	w := l.Waiting()
	bound := make(map[string]bool, len(decisions))
	for given, ok := range decisions {
		key := given
		switch keys := runlog.Named(w, given); {
		case len(keys) == 1:
			key = keys[0]
		case len(keys) > 1:
			return nil, fmt.Errorf("%w: %q in run %s names %d waiting calls; give one of their keys (%s)",
				ErrNoSuchCall, given, l.Start.RunID, len(keys), strings.Join(keys, ", "))
		default:
			if _, before := l.Decided[given]; !before {
				return nil, fmt.Errorf("%w: %q in run %s (calls waiting for a decision: %s)",
					ErrNoSuchCall, given, l.Start.RunID, describeWaiting(w))
			}
		}
		if prev, twice := bound[key]; twice && prev != ok {
			return nil, fmt.Errorf("%w: the call %s of run %s is both approved and denied", ErrNoSuchCall, key, l.Start.RunID)
		}
		bound[key] = ok
	}
	return bound, nil
}

// describeWaiting lists the waiting calls for an error message.
func describeWaiting(w map[string]string) string {
	if len(w) == 0 {
		return "none"
	}
	var out []string
	for key, id := range w {
		out = append(out, id+" (key "+key+")")
	}
	sort.Strings(out)
	return strings.Join(out, ", ")
}

// playsFrom is a model that plays a script and can start later in it:
// the scripted provider.
type playsFrom interface{ From(n int) llm.Provider }

// playOn is the run's own model positioned after the turns the log
// holds, when it is a model that plays a script: the one given in Go
// (WithProvider), or the one the spec names, opened again. Any other
// model just answers the next call.
func (a *Agent) playOn(l *runlog.Log) llm.Provider {
	at := l.Start.HistoryAttempts + l.Attempts // a conversation's script went on through its runs
	if at == 0 || a.o.model != l.Start.Model {
		return nil
	}
	if f := a.script(); f != nil {
		return f.From(at)
	}
	return nil
}

// script is the agent's model when it plays a script, or nil: the one
// the agent opened (its script read once), else opened again.
func (a *Agent) script() playsFrom {
	if len(a.models) > 0 {
		f, _ := a.models[0].(playsFrom)
		return f
	}
	var p llm.Provider
	if a.o.provider != nil {
		p = a.o.provider.p
	} else {
		if a.modelName == "" {
			return nil
		}
		m, err := llm.Open(a.modelName, a.modelAt)
		if err != nil {
			return nil
		}
		p = m.Provider
	}
	f, _ := p.(playsFrom)
	return f
}

// freshScript is a player of the agent's script from its first turn,
// when the spec names a scripted model (and no fallback): each run that
// is part of none plays the script anew, as a run of the binary does,
// whatever ran before it or beside it (a server's runs of one agent
// among them). A run that is part of another (a pipeline's stage, a
// sub-agent) goes on with the script where the agent's runs left it, so
// that a stage run again plays its next turns. A scripted model given in
// code (WithProvider) is the one player its giver made, shared by the
// agent's runs.
func (a *Agent) freshScript() llm.Provider {
	if a.o.provider != nil || len(a.models) != 1 {
		return nil
	}
	if f, ok := a.models[0].(playsFrom); ok {
		return f.From(0)
	}
	return nil
}

// traceKey is what a run is sampled by: its trace id, else its run id.
func (s *Session) traceKey() string {
	if id := s.cfg.info.TraceID; id != "" {
		return id
	}
	return s.state.RunID
}

// logSealer is the sealer of run logs for key; nil without one.
func logSealer(key []byte) (*runlog.Sealer, error) {
	if key == nil {
		return nil, nil
	}
	s, err := runlog.NewSealer(key)
	if err != nil {
		return nil, fmt.Errorf("%w: WithEncryptionKey: %v", ErrConfig, err)
	}
	return s, nil
}

// readOptions are the options of the agent's run log readers.
func (a *Agent) readOptions() []runlog.Option {
	if a.logSeal == nil {
		return nil
	}
	return []runlog.Option{runlog.Sealed(a.logSeal)}
}

// logOptions are the options of the agent's run log writers.
func (a *Agent) logOptions(more ...journal.Option) []journal.Option {
	if a.logSeal == nil {
		return more
	}
	return append([]journal.Option{journal.Sealed(a.logSeal)}, more...)
}

// freeResume gives back the lease of a resume that could not begin (a
// snapshot that does not open, a log that cannot be taken up): the run
// is free for the next resume at once, not when the lease runs out.
func (s *Session) freeResume(ctx context.Context, j *runJournal) {
	if rc := s.cfg.resume; rc != nil && !rc.replay && (j == nil || j.w == nil) {
		journal.Release(context.WithoutCancel(ctx), s.cfg.store, s.state.RunID, rc.holder)
	}
}
