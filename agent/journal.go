package agent

import (
	"context"
	"errors"
	"fmt"
	"hash"
	"sort"
	"strconv"
	"sync"
	"time"

	"github.com/agentry/agentry/event"
	"github.com/agentry/agentry/store"
)

// ErrStore is matched by the error of a run that could not be kept
// durable: its store failed, or another process took the run over.
var ErrStore = errors.New("run store failed")

// ErrDiverged is matched by the error of a resumed run whose replay
// asked something its log does not hold: the spec, the tools or the
// prompts changed since it was recorded.
var ErrDiverged = errors.New("run diverged from its log")

// commitEvery is how long records of safe work may wait for a commit:
// before a model call, what is queued is committed when the last commit
// is older than this, or when much is queued. A real model's call takes
// longer, so each of its turns commits; a run of fast turns commits a
// few together instead of paying a commit per turn. Intents of
// non-idempotent calls never wait.
const commitEvery = 50 * time.Millisecond

// maxQueued is how many records may wait for a commit.
const maxQueued = 512

// leaseTTL is how long a run's lease lasts unless renewed; the holder
// renews it every leaseTTL/3.
var leaseTTL = 30 * time.Second

// journal writes one run's log through the seams (the model and tool
// middleware of journal_mw.go and an event subscriber) and, when the run
// is resumed or replayed, serves what the log holds instead of calling
// again. Records of safe and idempotent calls and events are batched and
// committed before each model call; a non-idempotent call's intent is
// committed before it runs, its result when it returns.
type journal struct {
	st     store.Store
	runID  string
	holder string
	r      *run
	write  bool // false in a replay: nothing is written

	mu      sync.Mutex
	pending []store.Record
	failed  error     // the first write that failed; the run stops on it
	last    time.Time // the last commit

	// What the log holds, when the run is resumed or replayed.
	log      *storedLog
	n        int       // the run's model calls so far
	h        hash.Hash // the transcript hashed so far (digest)
	hashed   int       // how many messages h holds
	first    string    // the first message when h began
	live     bool      // a replay ran out of log: calls go to the model now
	quiet    int       // events of turns before this one were written already
	liveMode bool      // a replay runs safe and idempotent tools again
	approve  map[string]bool
	deny     map[string]bool
	diffs    []Difference
	// What was served from the log, so that the Result reports the
	// recorded timings of those calls rather than those of the replay.
	servedCalls []servedCall
	servedTools map[[2]string]*resultRecord // by turn and call id

	release func() // stops renewing the lease
}

type servedCall struct {
	index int // in State.ModelCalls
	rec   *modelRecord
}

// restore gives the calls served from the log their recorded timings.
func (j *journal) restore(res *Result) {
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
		st.Action.DurationMS, st.Action.Attempts, st.Timestamp = rec.DurationMS, rec.Attempts, rec.StartedAt
	}
}

// served notes a tool result served from the log.
func (j *journal) served(turn int, rec *resultRecord) {
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.servedTools == nil {
		j.servedTools = map[[2]string]*resultRecord{}
	}
	j.servedTools[[2]string{strconv.Itoa(turn), rec.CallID}] = rec
}

// add queues a record for the next commit.
func (j *journal) add(rec store.Record) {
	rec.Data = j.r.s.agent.redact.Bytes(rec.Data) // no secret reaches the store in the clear
	j.queue(rec)
}

// queue queues a record whose data is redacted already.
func (j *journal) queue(rec store.Record) {
	if !j.write {
		return
	}
	rec.Time = time.Now()
	j.mu.Lock()
	j.pending = append(j.pending, rec)
	j.mu.Unlock()
}

// commit writes what is queued, with recs after it, in one transaction.
func (j *journal) commit(ctx context.Context, recs ...store.Record) error {
	if !j.write {
		return nil
	}
	j.mu.Lock()
	defer j.mu.Unlock()
	return j.commitLocked(ctx, store.Write{}, recs...)
}

func (j *journal) commitLocked(ctx context.Context, w store.Write, recs ...store.Record) error {
	if j.failed != nil {
		return j.failed
	}
	now := time.Now()
	for i := range recs {
		recs[i].Time = now
		recs[i].Data = j.r.s.agent.redact.Bytes(recs[i].Data)
	}
	w.RunID, w.Holder = j.runID, j.holder
	w.Records = append(j.pending, recs...)
	// The write outlives a cancelled run: what happened must be on record.
	if err := j.st.Append(context.WithoutCancel(ctx), w); err != nil {
		j.failed = fmt.Errorf("%w: %w", ErrStore, err)
		return j.failed
	}
	j.pending = j.pending[:0]
	j.last = now
	return nil
}

// due reports whether what is queued should be committed now.
func (j *journal) due() bool {
	j.mu.Lock()
	defer j.mu.Unlock()
	return len(j.pending) >= maxQueued || time.Since(j.last) >= commitEvery
}

// event is the subscriber that writes the run's events.
func (j *journal) event(e event.Event) {
	// Runs redact their events when they emit them (sub-runs too).
	j.queue(store.Record{Kind: store.KindEvent, Turn: e.Turn, Data: mustJSON(e)})
}

// begin creates the run (or takes over a resumed one) and keeps its
// lease.
func (j *journal) begin(ctx context.Context, s *Session) error {
	if !j.write {
		return nil
	}
	r := j.r
	if j.log == nil {
		a := s.agent
		start := startRecord{Kind: "agent", RunID: r.st.RunID, SessionID: r.st.SessionID, ParentRunID: r.st.ParentRunID,
			Spec: mustJSON(a.spec), BaseDir: absDir(a.o.baseDir), Model: a.o.model, Input: r.st.Input, UserID: s.cfg.userID,
			CorrelationID: s.cfg.correlationID, TraceParent: s.cfg.traceParent, Metadata: s.cfg.metadata, StartedAt: r.st.StartedAt}
		if r.mem != nil {
			start.Memory = r.mem.block
		}
		if a.o.agents != nil {
			start.AgentsDir = absDir(a.o.agents.Path)
		}
		err := j.st.Create(ctx, store.Run{ID: r.st.RunID, Kind: "agent", Name: a.spec.AgentName, Version: a.spec.Version,
			ParentID: r.st.ParentRunID, SessionID: r.st.SessionID, Status: store.Running, Holder: j.holder,
			LeaseUntil: time.Now().Add(leaseTTL), CreatedAt: r.st.StartedAt.Time})
		if err == nil {
			err = j.commit(ctx, store.Record{Kind: store.KindStart, Data: mustJSON(start)})
		}
		if err != nil {
			return fmt.Errorf("%w: %w", ErrStore, err)
		}
	} else {
		rec := resumeRecord{Turn: j.quiet, Holder: j.holder, Model: s.agent.o.model, Approved: keys(j.approve), Denied: keys(j.deny),
			Reason: s.cfg.denyReason}
		j.mu.Lock()
		err := j.commitLocked(ctx, store.Write{Status: store.Running},
			store.Record{Kind: store.KindResume, Turn: j.quiet, Data: mustJSON(rec)})
		j.mu.Unlock()
		if err != nil {
			return err
		}
	}
	// A lease lost to another process stops the run, which may no
	// longer write.
	j.release = store.KeepLease(j.st, j.runID, j.holder, leaseTTL, func(err error) {
		j.mu.Lock()
		j.failed = fmt.Errorf("%w: %w", ErrStore, err)
		failed := j.failed
		j.mu.Unlock()
		s.stop(failed)
	})
	return nil
}

// end writes the run's Result and its final status, and gives up the
// lease.
func (j *journal) end(ctx context.Context, res *Result) error {
	if j.release != nil {
		j.release()
	}
	if j.log != nil {
		j.restore(res)
	}
	if !j.write {
		return nil
	}
	status, sum := res.StoreStatus()
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.failed != nil && errors.Is(j.failed, store.ErrLeaseLost) {
		return j.failed // the run is another process's now: nothing more is ours to write
	}
	j.failed = nil // the final write tries again what a failed one left queued
	return j.commitLocked(ctx, store.Write{Status: status, Summary: &sum, Release: true},
		store.Record{Kind: store.KindResult, Turn: res.Iterations, Data: mustJSON(res)})
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
func (j *journal) diverged(d Difference) error {
	j.mu.Lock()
	j.diffs = append(j.diffs, d)
	j.mu.Unlock()
	return fmt.Errorf("%w: %s", ErrDiverged, d)
}
