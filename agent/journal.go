package agent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"hash"
	"reflect"
	"sort"
	"strconv"
	"sync"
	"time"

	"github.com/agentry/agentry/agent/drive"
	"github.com/agentry/agentry/internal/journal"
	"github.com/agentry/agentry/policy"
	"github.com/agentry/agentry/runlog"
	"github.com/agentry/agentry/spec"
	"github.com/agentry/agentry/store"
)

// commitEvery is how long records of safe work may wait for a commit:
// before a model call, what is queued is committed when the last commit
// is older than this (a queue of journal.MaxQueued records commits
// itself). A real model's call takes longer, so each of its turns
// commits; a run of fast turns commits a few together instead of paying
// a commit per turn. Intents of non-idempotent calls never wait.
const commitEvery = 50 * time.Millisecond

// journal writes one run's log through the seams (the model and tool
// middleware of journal_mw.go and an event subscriber) and, when the run
// is resumed or replayed, serves what the log holds instead of calling
// again. Records of safe and idempotent calls and events are batched and
// committed before each model call; a non-idempotent call's intent is
// committed before it runs, its result when it returns.
type runJournal struct {
	w     *journal.Writer // nil in a replay: nothing is written
	r     *run
	unsub func() // the writer's subscription to the run's events

	// What the log holds, when the run is resumed or replayed.
	log      *runlog.Log
	n        int       // the run's model calls so far
	h        hash.Hash // the transcript hashed so far (digest)
	hashed   int       // how many messages h holds
	first    string    // the first message when h began
	live     bool      // a replay ran out of log: calls go to the model now
	quiet    int       // events of turns before this one were written already
	liveMode bool      // a replay runs safe and idempotent tools again
	approve  map[string]bool
	deny     map[string]bool

	// A run driven from elsewhere (Dispatch, WithResults): the calls this
	// turn hands out, nil when the run runs its calls; the results given
	// for calls handed out before; and the turn they belong to, whose
	// calls' ends (and the turn's end) are still to be told.
	out      *dispatched
	supplied map[string]runlog.ToolResult
	tailTurn int

	mu    sync.Mutex
	diffs []Difference
	// What was served from the log, so that the Result reports the
	// recorded timings of those calls rather than those of the replay.
	servedCalls []servedCall
	servedTools map[[2]string]*runlog.ToolResult // by turn and call id
}

type servedCall struct {
	index int // in State.ModelCalls
	rec   *runlog.ModelCall
}

// restore gives the calls served from the log their recorded timings.
func (j *runJournal) restore(res *Result) {
	j.mu.Lock()
	defer j.mu.Unlock()
	for _, sc := range j.servedCalls {
		if sc.index < len(res.ModelCalls) {
			mc := &res.ModelCalls[sc.index]
			res.Metrics.ModelLatencyMS += sc.rec.DurationMS - mc.DurationMS
			mc.DurationMS, mc.Attempts = sc.rec.DurationMS, max(sc.rec.Attempts, 1)
		}
	}
	for i := range res.Steps {
		st := &res.Steps[i]
		if st.Action == nil {
			continue
		}
		rec := j.servedTools[[2]string{strconv.Itoa(st.Turn), st.Action.CallID}]
		if rec == nil {
			continue
		}
		if res.Metrics.ToolLatencyMS != nil {
			res.Metrics.ToolLatencyMS[st.Action.Tool] += rec.DurationMS - st.Action.DurationMS
		}
		st.Action.DurationMS, st.Action.Attempts, st.Timestamp = rec.DurationMS, rec.Attempts, Timestamp{rec.StartedAt}
	}
}

// served notes a tool result served from the log.
func (j *runJournal) served(turn int, rec *runlog.ToolResult) {
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.servedTools == nil {
		j.servedTools = map[[2]string]*runlog.ToolResult{}
	}
	j.servedTools[[2]string{strconv.Itoa(turn), rec.CallID}] = rec
}

// add queues a record for the next commit (none in a replay).
func (j *runJournal) add(kind store.Kind, turn int, key string, v any) {
	if j.w != nil {
		j.w.Add(journal.Record(kind, turn, key, v))
	}
}

// commit writes what is queued, with recs after it, in one transaction.
func (j *runJournal) commit(ctx context.Context, recs ...store.Record) error {
	if j.w == nil {
		return nil
	}
	return j.w.Commit(ctx, recs...)
}

// begin creates the run (or takes over a resumed one) and keeps its
// lease: a lease lost to another process stops the run, which may no
// longer write.
func (j *runJournal) begin(ctx context.Context, s *Session) error {
	r := j.r
	red := s.agent.redact
	var err error
	if j.log == nil {
		a := s.agent
		ctx = context.WithoutCancel(ctx) // an aborted run's start is on record too (journal.Create)
		a.start()
		if err := a.pin(ctx, s.cfg.store); err != nil {
			return err
		}
		start := &runlog.Start{Kind: "agent", RunID: r.st.RunID, SessionID: r.st.SessionID, ParentRunID: r.st.ParentRunID,
			Spec: a.started.spec, BaseDir: a.started.baseDir, Model: a.o.model, Input: r.st.Input, UserID: s.cfg.info.UserID,
			CorrelationID: s.cfg.info.CorrelationID, TraceParent: s.cfg.info.TraceParent, TraceState: s.cfg.info.TraceState, Metadata: s.cfg.info.Metadata, StartedAt: r.st.StartedAt.Time}
		if p := policy.PrincipalFrom(ctx); p != nil {
			start.Roles = p.Roles
		}
		if r.mem != nil {
			start.Memory = r.mem.startRecord(r.st.RunID)
		}
		conv := s.cfg.conversation()
		if n := r.notes; n != nil {
			start.Conversation, start.History, start.HistoryAttempts, start.HistoryOf = conv, n.history, n.historyCalls, n.historyOf
		}
		if e := s.cfg.extra; e != nil && e.seeded {
			seed := e.seed
			start.Seed = &seed
		}
		start.FixedClock = r.fixed
		var opts []journal.Option
		if e := s.cfg.extra; e != nil {
			start.Images, start.Instructions = e.images, e.instructions
			if e.driver != "" {
				start.Driver = e.driver
				opts = append(opts, journal.HeldAs(journal.DriverHolder(e.driver)))
			}
		}
		if a.o.agents != nil {
			start.AgentsDir = journal.AbsDir(a.o.agents.Path)
		}
		j.w, err = journal.Create(ctx, s.cfg.store, store.Run{ID: r.st.RunID, Kind: "agent", Name: a.spec.AgentName,
			Version: a.spec.Version, ParentID: r.st.ParentRunID, SessionID: r.st.SessionID, Conversation: conv, HistoryOf: r.historyOf(),
			CreatedAt: r.st.StartedAt.Time}, start, red,
			append(a.logOptions(), opts...)...)
	} else {
		rc := s.cfg.resume
		rec := runlog.Resume{Turn: j.quiet, Holder: rc.holder, Model: s.agent.o.model, Approved: keys(j.approve), Denied: keys(j.deny),
			Reason: s.cfg.denyReason(), Dispatched: j.tailTurn > 0}
		j.w, err = journal.Take(ctx, s.cfg.store, r.st.RunID, rc.holder, red, journal.Record(store.KindResume, j.quiet, "", rec),
			s.agent.logOptions(journal.Continuing(rc.log))...)
	}
	if err != nil {
		return err
	}
	j.w.KeepLease(s.stop)
	return nil
}

// end writes the run's Result and its final status, and gives up the
// lease.
func (j *runJournal) end(ctx context.Context, res *Result) error {
	if j.log != nil {
		j.restore(res)
	}
	if j.w == nil {
		return nil
	}
	status, sum := res.StoreStatus()
	if j.r.s.cfg.conversation() != "" {
		// Where the conversation's next run starts, in the same write.
		calls := j.r.notes.historyCalls
		for _, mc := range res.ModelCalls {
			calls += max(mc.Attempts, 1)
		}
		j.w.Add(journal.Record(store.KindHistory, res.Iterations, "", runlog.History{Messages: j.r.ownHistory(), Attempts: calls}))
	}
	return j.w.End(ctx, status, sum, res.Iterations, res)
}

// yield writes what is queued and keeps the run's lease for its driver,
// which goes on with it once the calls handed out have run: the run
// stays running, or awaits approval when calls of the turn wait for a
// person.
func (j *runJournal) yield(ctx context.Context, err error) error {
	if j.w == nil {
		return nil
	}
	status := store.Running
	if errors.Is(err, ErrAwaitingApproval) { // calls of the turn wait for a person too
		status = store.AwaitingApproval
	}
	return j.w.Hold(ctx, status, drive.Hold)
}

// interrupt writes what is queued and gives up the lease without ending
// the run: the store reports it interrupted, for Resume.
func (j *runJournal) interrupt(ctx context.Context, _ *Result) error {
	if j.w == nil {
		return nil
	}
	err := j.w.Commit(ctx)
	j.w.Release(ctx)
	return err
}

func keys(m map[string]bool) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// Difference is where a replay (or a resume) found the run doing
// something else than its log recorded.
type Difference struct {
	// Turn is the loop turn; Step the call within it (from 1), when the
	// difference is a tool call's.
	Turn int    `json:"turn"`
	Step int    `json:"step,omitempty"`
	Tool string `json:"tool,omitempty"`
	What string `json:"what"`
	// Recorded and Replayed are what differs, when it can be shown.
	Recorded string `json:"recorded,omitempty"`
	Replayed string `json:"replayed,omitempty"`
}

func (d Difference) String() string {
	s := "turn " + strconv.Itoa(d.Turn)
	if d.Step > 0 {
		s += ", call " + strconv.Itoa(d.Step)
	}
	if d.Tool != "" {
		s += " (" + d.Tool + ")"
	}
	s += ": " + d.What
	if d.Recorded != "" || d.Replayed != "" {
		s += "\n  recorded: " + d.Recorded + "\n  replayed: " + d.Replayed
	}
	return s
}

// diverged notes a difference and returns it as an error matching
// ErrDiverged.
func (j *runJournal) diverged(d Difference) error {
	j.mu.Lock()
	j.diffs = append(j.diffs, d)
	j.mu.Unlock()
	return fmt.Errorf("%w: %s", ErrDiverged, d)
}

// startFacts are what every start record of the agent's runs says of
// it, worked out once: its spec as JSON, its directory made absolute.
type startFacts struct {
	once    sync.Once
	spec    json.RawMessage
	baseDir string
}

// start works the agent's start facts out, once.
func (a *Agent) start() {
	a.started.once.Do(func() {
		a.started.spec, a.started.baseDir = journal.JSON(a.spec), journal.AbsDir(a.o.baseDir)
	})
}

// pin checks, on a store that pins versions (store.Pins), that the agent's
// output schema is the one the first stored run of its NAME@VERSION had:
// a changed schema needs a new version.
func (a *Agent) pin(ctx context.Context, st store.Store) error {
	p, ok := st.(store.Pins)
	if !ok {
		return nil
	}
	// A pin, once it matched, matches for good: a store pins a version
	// once and never changes it, so each store is asked once.
	comparable := reflect.TypeOf(st).Comparable()
	if comparable {
		if _, done := a.pinnedIn.Load(st); done {
			return nil
		}
	}
	digest := spec.SchemaHash(a.spec)
	pinned, err := p.Pin(ctx, a.spec.AgentName, a.spec.Version, digest)
	if err != nil {
		return err
	}
	if pinned != digest {
		return fmt.Errorf("%w: %w: agent %s version %s: its output_schema (%s) differs from the one its stored runs have (%s); give the changed schema a new version",
			ErrConfig, ErrVersionChanged, a.spec.AgentName, a.spec.Version, digest, pinned)
	}
	if comparable {
		a.pinnedIn.Store(st, struct{}{})
	}
	return nil
}
