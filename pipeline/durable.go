package pipeline

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/agentry/agentry/agent"
	"github.com/agentry/agentry/event"
	"github.com/agentry/agentry/internal/journal"
	"github.com/agentry/agentry/llm"
	"github.com/agentry/agentry/policy"
	"github.com/agentry/agentry/runlog"
	"github.com/agentry/agentry/store"
)

// WithStore stores the run in st: the pipeline's own run (its definition,
// input, stage events and Result, whose envelope a paused pipeline
// resumes from) and each stage agent's run, as a run of its own whose
// parent is the pipeline's.
func WithStore(st store.Store) RunOption { return func(c *runConfig) { c.store = st } }

// WithRunID gives the run this id instead of a new one. With WithStore,
// a stored pipeline paused for the user (awaiting_approval) goes on as
// the same run (see Stored).
func WithRunID(id string) RunOption { return func(c *runConfig) { c.runID = id } }

// Confirmation answers a stage paused with the outcome confirm: approved or
// not, and why. Given to Resume as the answer, it reaches the stage's
// agent as user_response ({"approved": ..., "reason": ...}) and, in a
// stored run, the audit log.
type Confirmation struct {
	Approved bool   `json:"approved"`
	Reason   string `json:"reason,omitempty"`
}

// openStore creates the pipeline's run in its store, or takes over the
// stored run WithRunID names, which must be a pipeline's that waits for
// the user or was interrupted. Everything the run writes goes through
// one journal.Writer, which redacts it.
func (r *runState) openStore(ctx context.Context, c *runConfig) error {
	if c.store == nil {
		if c.runID != "" {
			return fmt.Errorf("%w: WithRunID continues a stored run: give its store (WithStore)", agent.ErrNotResumable)
		}
		if c.conversation != "" {
			return fmt.Errorf("%w: WithConversation needs a run store (WithStore): a conversation lives there", ErrInvalid)
		}
		return nil
	}
	var w *journal.Writer
	var err error
	fresh := c.runID == ""
	if c.driver != "" && c.cont == nil {
		// A driven run's first step creates the run of the id it was given.
		if _, gerr := c.store.Get(context.WithoutCancel(ctx), c.runID); errors.Is(gerr, store.ErrNotFound) {
			fresh = true
		}
	}
	if fresh {
		w, err = r.create(ctx, c)
	} else {
		w, err = r.takeOver(ctx, c.store, c.driver, c.cont != nil)
	}
	if err != nil {
		return err
	}
	r.store = w
	r.sessionOpts = append(r.sessionOpts, agent.WithStore(c.store))
	// The pipeline's own events; each stage's are in its own run.
	r.unsub = r.bus.Subscribe(func(e event.Event) {
		if e.RunID == r.runID {
			w.Event(e)
		}
	}, event.Inline(), event.Except(event.ContentChunk))
	w.KeepLease(nil)
	return nil
}

// create creates the run in its store, in its conversation when it has
// one: a run whose history another run of the conversation made stale
// before it was created reads it again.
func (r *runState) create(ctx context.Context, c *runConfig) (*journal.Writer, error) {
	def := r.p.def
	for tries := 0; ; tries++ {
		var hist []llm.Message
		var of string
		if c.conversation != "" {
			var err error
			if hist, of, err = r.readHistory(ctx, c.store, c.conversation); err != nil {
				return nil, err
			}
		}
		start := &runlog.Start{Kind: "pipeline", RunID: r.runID, Definition: journal.JSON(def), BaseDir: journal.AbsDir(r.p.baseDir),
			AgentsDir: journal.AbsDir(r.p.agentsDir), Input: r.env.RawInput, StartedAt: r.start, Conversation: c.conversation, History: hist}
		if p := policy.PrincipalFrom(ctx); p != nil {
			start.UserID = p.UserID // the run's owner: the user its stages act for
		}
		opts := r.p.logOptions()
		if c.driver != "" {
			opts = append(opts, journal.HeldAs(journal.DriverHolder(c.driver)))
			start.Driver = c.driver // aborted through its driver; a pause for the user is answered here
		}
		w, err := journal.Create(ctx, c.store, store.Run{ID: r.runID, Kind: "pipeline", Name: def.PipelineName, Version: def.Version,
			SessionID: r.env.ID, Conversation: c.conversation, HistoryOf: of, CreatedAt: r.start}, start, r.p.red, opts...)
		if errors.Is(err, store.ErrStaleHistory) && tries < 8 {
			continue
		}
		if err == nil && c.conversation != "" {
			r.joined(c.conversation, hist)
		}
		return w, err
	}
}

// takeOver continues the stored run r.runID: a pipeline's, waiting for
// the user or interrupted, and not held by a live process.
func (r *runState) takeOver(ctx context.Context, st store.Store, driver string, dispatched bool) (*journal.Writer, error) {
	ctx = context.WithoutCancel(ctx) // a run aborted as it is taken over ends on record too
	run, err := st.Get(ctx, r.runID)
	if err != nil {
		return nil, err
	}
	if run.Kind != "pipeline" {
		return nil, fmt.Errorf("%w: run %s is a %s's, not a pipeline's", agent.ErrNotResumable, run.ID, run.Kind)
	}
	var as []journal.Option
	if driver != "" {
		as = append(as, journal.HeldAs(journal.DriverHolder(driver)))
		if journal.OwnedBy(run.Holder, driver) { // the driver's earlier step: fenced off
			if err := st.Break(ctx, run.ID, run.Holder); err != nil && !errors.Is(err, store.ErrLeaseLost) {
				return nil, err
			}
			if run, err = st.Get(ctx, r.runID); err != nil {
				return nil, err
			}
		}
	}
	holder, err := journal.TakeOver(ctx, st, &run, as...)
	if err != nil {
		return nil, err
	}
	var more []journal.Option
	var ro []runlog.Option
	if r.p.seal != nil {
		ro = append(ro, runlog.Sealed(r.p.seal))
	}
	l, err := runlog.Read(ctx, st, r.runID, ro...)
	if err != nil {
		journal.Release(ctx, st, r.runID, holder)
		return nil, err
	}
	if r.p.seal != nil { // the next sealed record follows the log's last
		more = r.p.logOptions(journal.Continuing(l))
	}
	if l.Start.Conversation != "" { // it goes on from the history it started from
		r.joined(l.Start.Conversation, l.Start.History)
	}
	w, err := journal.Take(ctx, st, r.runID, holder, r.p.red,
		journal.Record(store.KindResume, r.env.HopCount+1, "", runlog.Resume{Turn: r.env.HopCount, Holder: holder, Dispatched: dispatched}), more...)
	if err != nil {
		journal.Release(ctx, st, r.runID, holder)
		return nil, err
	}
	if dec, ok := r.env.Metadata["user_response"].(Confirmation); ok {
		decision := map[bool]string{true: "approve", false: "deny"}[dec.Approved]
		if err := w.Audit(ctx, store.AuditRecord{Agent: r.p.def.PipelineName, Rule: "pipeline.confirm",
			Decision: decision, Target: "stage:" + r.env.Current, Reason: dec.Reason}); err != nil {
			w.Release(ctx)
			return nil, err
		}
	}
	return w, nil
}

// commit writes the events queued since the last stage.
func (r *runState) commit() {
	if r.store != nil {
		r.store.Commit(context.Background()) // a failure is kept: closeStore reports it
	}
}

// closeStore writes the Result and the run's status, and gives up the
// lease.
func (r *runState) closeStore() error {
	w := r.store
	if w == nil {
		return nil
	}
	r.bus.Flush()
	r.unsub()
	t := &r.res.Result
	status, sum := t.StoreStatus()
	if r.conversation != "" {
		// Where the conversation's next run starts, in the same write.
		w.Add(journal.Record(store.KindHistory, t.Iterations, "", r.ownHistory()))
	}
	return w.End(context.Background(), status, sum, t.Iterations, r.res)
}

// Stored builds the pipeline a stored run ran (its definition as it ran,
// its directories) and returns it with the envelope the run ended with:
// a paused run's goes on with Resume, WithStore and WithRunID.
func Stored(ctx context.Context, st store.Store, runID string, opts ...Option) (*Pipeline, *Envelope, error) {
	var o options
	for _, opt := range opts {
		opt(&o)
	}
	var ro []runlog.Option
	if o.key != nil {
		s, err := runlog.NewSealer(o.key)
		if err != nil {
			return nil, nil, fmt.Errorf("%w: WithEncryptionKey: %v", ErrInvalid, err)
		}
		ro = append(ro, runlog.Sealed(s))
	}
	l, err := runlog.Read(ctx, st, runID, ro...)
	if err != nil {
		return nil, nil, err
	}
	if l.Start.Kind != "pipeline" {
		return nil, nil, fmt.Errorf("run %s is not a pipeline's", runID)
	}
	var def Definition
	if err := json.Unmarshal(l.Start.Definition, &def); err != nil {
		return nil, nil, fmt.Errorf("run %s: its definition: %w", runID, err)
	}
	p, err := New(&def, l.Start.BaseDir, append([]Option{WithAgentsDir(l.Start.AgentsDir)}, opts...)...)
	if err != nil {
		return nil, nil, err
	}
	if l.Result == nil {
		return p, nil, nil
	}
	var res Result
	if err := json.Unmarshal(l.Result, &res); err != nil {
		return nil, nil, fmt.Errorf("run %s: its Result: %w", runID, err)
	}
	return p, res.Envelope, nil
}
