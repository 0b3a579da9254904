// Package journal writes runs' logs: the records of a run as it
// happens, under the run's lease, redacted and, given a key, sealed. The
// logs it writes are read with runlog.
package journal

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/agentry/agentry/event"
	"github.com/agentry/agentry/llm"
	"github.com/agentry/agentry/policy"
	"github.com/agentry/agentry/runlog"
	"github.com/agentry/agentry/store"
	"github.com/agentry/agentry/tool"
)

// Errors of the package, matched with errors.Is.
var (
	// ErrStore is matched by the error of a run that could not be kept
	// durable: its store failed, or another process took the run over.
	ErrStore = errors.New("run store failed")
	// ErrNotResumable is matched by the error of taking over a run that
	// ended (completed, failed or aborted) or that another live process
	// drives.
	ErrNotResumable = errors.New("run cannot be resumed")
)

// MaxQueued is how many records may wait for a commit: the one that
// makes the queue this long commits it.
const MaxQueued = 512

// LeaseTTL is how long a run's lease lasts unless renewed; a Writer
// renews it every third of it.
const LeaseTTL = 30 * time.Second

// Writer appends one run's records to its store. Every record passes
// its redactor before it is queued, so no secret reaches the store in
// the clear, whoever writes. Records wait in a queue until Commit (or
// until MaxQueued of them wait); a write is refused once another holder
// took the run's lease. Its methods are safe for concurrent use.
type Writer struct {
	st     store.Store
	runID  string
	holder string
	red    *policy.Redactor

	seal     *runlog.Sealer // nil: records are not encrypted
	asHolder string         // HeldAs

	mu      sync.Mutex
	sealed  uint64 // the run's sealed records so far
	pending []store.Record
	failed  error       // the first write that failed; every later one fails with it
	last    time.Time   // the last commit
	release func()      // stops renewing the lease
	timer   *time.Timer // commits what waits too long (CommitWithin); nil until needed
	closed  bool        // ended or released: the timer writes nothing more
}

// Create creates run in st (its status running, its lease the Writer's)
// and writes start as its first record. red redacts every record; nil
// redacts secrets (policy.Secrets).
func Create(ctx context.Context, st store.Store, run store.Run, start *runlog.Start, red *policy.Redactor, opts ...Option) (*Writer, error) {
	w := newWriter(st, run.ID, store.NewHolder(), red, opts)
	if h := w.asHolder; h != "" {
		w.holder = h
	}
	run.Status, run.Holder, run.LeaseUntil = store.Running, w.holder, time.Now().Add(LeaseTTL)
	if run.User == "" {
		run.User = start.UserID // the run's owner: the user it acts for
	}
	// A run aborted before it began is still on record (it ends aborted
	// at once): its id may have been given out already. The run and its
	// start are written together: no run is on record without its start.
	ctx = context.WithoutCancel(ctx)
	w.mu.Lock()
	err := w.commitLocked(ctx, store.Write{Create: &run}, Record(store.KindStart, 0, "", start))
	w.mu.Unlock()
	if err != nil {
		return nil, err
	}
	return w, nil
}

// Take writes to a run whose lease holder holds already (see Acquire):
// it marks the run running again and appends rec (a Resume, say).
func Take(ctx context.Context, st store.Store, runID, holder string, red *policy.Redactor, rec store.Record, opts ...Option) (*Writer, error) {
	w := newWriter(st, runID, holder, red, opts)
	w.mu.Lock()
	err := w.commitLocked(ctx, store.Write{Status: store.Running}, rec)
	w.mu.Unlock()
	if err != nil {
		return nil, err
	}
	return w, nil
}

func newWriter(st store.Store, runID, holder string, red *policy.Redactor, opts []Option) *Writer {
	if red == nil {
		red = policy.Secrets()
	}
	var c config
	for _, o := range opts {
		o(&c)
	}
	return &Writer{st: st, runID: runID, holder: holder, red: red, last: time.Now(), seal: c.seal, sealed: c.after, asHolder: c.holder}
}

// Option configures a Writer, or TakeOver.
type Option func(*config)

type config struct {
	seal   *runlog.Sealer
	after  uint64
	holder string
}

// DriverHolder is a new lease holder of driver's: what drives a run
// from several processes in turn (a workflow) holds it under its name.
func DriverHolder(driver string) string { return driver + "/" + store.NewHolder() }

// OwnedBy reports whether holder is one of driver's (DriverHolder).
func OwnedBy(holder, driver string) bool {
	return driver != "" && strings.HasPrefix(holder, driver+"/")
}

// HeldAs makes Create and TakeOver lease the run to holder rather than
// to a holder of this process: a driver that moves between processes (a
// workflow) names its own.
func HeldAs(holder string) Option { return func(c *config) { c.holder = holder } }

// Sealed makes a Writer encrypt every record it writes with s (see
// runlog.Sealer): a log read with a key holds only sealed records.
func Sealed(s *runlog.Sealer) Option { return func(c *config) { c.seal = s } }

// Continuing makes a Writer that goes on with the run l was read from
// (Take) seal its records after the ones l holds.
func Continuing(l *runlog.Log) Option { return func(c *config) { c.after = l.SealedRecords } }

// sealLocked encrypts rec as the run's next sealed record; w.mu is held.
func (w *Writer) sealLocked(rec *store.Record) {
	if w.seal != nil {
		w.sealed++
		w.seal.Seal(w.runID, rec, w.sealed)
	}
}

// TakeOver leases the stored run to a new holder of this process, which
// it returns (for Take, or to give up with Release). The run must be
// resumable: interrupted, or awaiting approval; a run still marked
// running whose holder died on this machine is taken as interrupted.
func TakeOver(ctx context.Context, st store.Store, run *store.Run, opts ...Option) (holder string, err error) {
	if (run.Status == store.Running || run.Status == store.Interrupted) && run.Holder != "" && store.HolderDead(run.Holder) {
		if err := st.Break(ctx, run.ID, run.Holder); err != nil && !errors.Is(err, store.ErrLeaseLost) {
			return "", err
		}
		run.Status = store.Interrupted
	}
	switch {
	case run.Status.Resumable():
	case run.Status == store.Running:
		return "", fmt.Errorf("%w: %w", ErrNotResumable, &store.HeldError{RunID: run.ID, Holder: run.Holder, Until: run.LeaseUntil})
	default:
		return "", fmt.Errorf("%w: run %s is %s; only interrupted runs and runs awaiting approval resume", ErrNotResumable, run.ID, run.Status)
	}
	var c config
	for _, o := range opts {
		o(&c)
	}
	holder = store.NewHolder()
	if c.holder != "" {
		holder = c.holder // HeldAs
	}
	if err := st.Acquire(ctx, run.ID, holder, LeaseTTL); err != nil {
		return "", fmt.Errorf("%w: %w", ErrNotResumable, err)
	}
	return holder, nil
}

// Record is a record of kind holding v, not yet redacted.
func Record(kind store.Kind, turn int, key string, v any) store.Record {
	return store.Record{Kind: kind, Turn: turn, Key: key, Data: JSON(v)}
}

// RunID is the run the Writer writes.
func (w *Writer) RunID() string { return w.runID }

// Holder is the Writer's lease holder.
func (w *Writer) Holder() string { return w.holder }

// Add queues rec for the next commit, redacted. A queue of MaxQueued
// records commits itself; an error then is kept for the next Commit.
func (w *Writer) Add(rec store.Record) {
	rec.Data = w.red.Bytes(rec.Data)
	rec.Time = time.Now()
	w.mu.Lock()
	defer w.mu.Unlock()
	w.sealLocked(&rec)
	w.pending = append(w.pending, rec)
	if len(w.pending) >= MaxQueued {
		w.commitLocked(context.Background(), store.Write{})
	}
}

// Event is an event subscriber that queues each event it is given.
// Events are redacted when emitted; the Writer redacts them again, as it
// does every record.
func (w *Writer) Event(e event.Event) {
	w.Add(store.Record{Kind: store.KindEvent, Turn: e.Turn, Data: JSON(e)})
}

// Commit writes what is queued, then recs, in one transaction.
func (w *Writer) Commit(ctx context.Context, recs ...store.Record) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.commitLocked(ctx, store.Write{}, recs...)
}

// CommitWithin makes what is queued reach the store within d: at once
// when the last commit is d old, else by a timer. A queued record (an
// event someone watches for) then never waits longer than d, however
// long the call that follows takes.
func (w *Writer) CommitWithin(ctx context.Context, d time.Duration) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if len(w.pending) == 0 {
		return nil
	}
	age := time.Since(w.last)
	if age >= d {
		return w.commitLocked(ctx, store.Write{})
	}
	if w.timer == nil {
		w.timer = time.AfterFunc(d-age, w.commitLate)
	} else {
		w.timer.Reset(d - age)
	}
	return nil
}

// commitLate is CommitWithin's timer: it commits what still waits. A
// failure is the run's next write's.
func (w *Writer) commitLate() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.closed && len(w.pending) > 0 {
		w.commitLocked(context.Background(), store.Write{})
	}
}

func (w *Writer) commitLocked(ctx context.Context, wr store.Write, recs ...store.Record) error {
	if w.failed != nil {
		return w.failed
	}
	now := time.Now()
	for i := range recs {
		recs[i].Time = now
		recs[i].Data = w.red.Bytes(recs[i].Data)
		w.sealLocked(&recs[i])
	}
	wr.RunID, wr.Holder = w.runID, w.holder
	wr.Records = append(w.pending, recs...)
	// The write outlives a cancelled run: what happened must be on record.
	if err := w.st.Append(context.WithoutCancel(ctx), wr); err != nil {
		w.failed = fmt.Errorf("%w: %w", ErrStore, err)
		return w.failed
	}
	w.pending = w.pending[:0]
	w.last = now
	return nil
}

// Audit appends an audit record of the run, its text redacted.
func (w *Writer) Audit(ctx context.Context, rec store.AuditRecord) error {
	return Audit(ctx, w.st, w.red, w.runID, rec)
}

// Audit appends an audit record of runID to st, its text redacted by red:
// for a run that keeps no log (one tracing did not sample) as for one
// that does (Writer.Audit). The record is written even when ctx is done.
func Audit(ctx context.Context, st store.Store, red *policy.Redactor, runID string, rec store.AuditRecord) error {
	rec.RunID = runID
	rec.Reason, rec.Target = red.String(rec.Reason), red.String(rec.Target)
	if _, err := st.AppendAudit(context.WithoutCancel(ctx), rec); err != nil {
		return fmt.Errorf("%w: audit: %w", ErrStore, err)
	}
	return nil
}

// KeepLease renews the run's lease until End or Release; lost, if not
// nil, is called when another holder took the run, after which every
// write fails.
func (w *Writer) KeepLease(lost func(error)) {
	w.release = store.KeepLease(w.st, w.runID, w.holder, LeaseTTL, func(err error) {
		w.mu.Lock()
		w.failed = fmt.Errorf("%w: %w", ErrStore, err)
		failed := w.failed
		w.mu.Unlock()
		if lost != nil {
			lost(failed)
		}
	})
}

// End writes what is queued and the run's result (of kind
// store.KindResult at turn), sets its status and summary, and gives up
// its lease. A write that failed before is tried again: the result must
// be on record. A run another holder took is not written.
func (w *Writer) End(ctx context.Context, status store.Status, sum store.Summary, turn int, result any) error {
	w.stopLease()
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.failed != nil && errors.Is(w.failed, store.ErrLeaseLost) {
		return w.failed // the run is another process's now: nothing more is ours to write
	}
	w.failed = nil
	if w.seal != nil && sum.Error != "" {
		// The error's text may quote the run's data (a tool's message, the
		// input): the listing says only that there is one.
		sum.Error = runlog.SealedError
	}
	return w.commitLocked(ctx, store.Write{Status: status, Summary: &sum, Release: true},
		Record(store.KindResult, turn, "", result))
}

// Hold writes what is queued, sets the run's status (running, or
// awaiting approval) and keeps its lease for ttl without renewing it:
// the run's driver goes on with it later, in this process or another,
// and nobody else may take it meanwhile.
func (w *Writer) Hold(ctx context.Context, status store.Status, ttl time.Duration) error {
	w.stopLease()
	w.mu.Lock()
	err := w.commitLocked(ctx, store.Write{Status: status})
	w.mu.Unlock()
	if err != nil {
		return err
	}
	if err := w.st.Renew(context.WithoutCancel(ctx), w.runID, w.holder, ttl); err != nil {
		return fmt.Errorf("%w: %w", ErrStore, err)
	}
	return nil
}

// Release gives up the run's lease without ending it: a run refused
// after its lease was taken is free for another process at once.
func (w *Writer) Release(ctx context.Context) {
	w.stopLease()
	Release(ctx, w.st, w.runID, w.holder)
}

// Release gives up holder's lease of runID, writing nothing else.
func Release(ctx context.Context, st store.Store, runID, holder string) {
	st.Append(context.WithoutCancel(ctx), store.Write{RunID: runID, Holder: holder, Release: true})
}

func (w *Writer) stopLease() {
	if w.release != nil {
		w.release()
	}
	w.mu.Lock()
	w.closed = true
	if w.timer != nil {
		w.timer.Stop()
	}
	w.mu.Unlock()
}

// Interrupted returns the runs of st that were interrupted: their
// process died (a lease that ran out, or a holder on this host that no
// longer exists).
func Interrupted(ctx context.Context, st store.Store) ([]store.Run, error) {
	runs, err := st.List(ctx, store.Filter{Status: store.Interrupted, Limit: 1000})
	if err != nil {
		return nil, err
	}
	for i, r := range runs {
		if r.Holder != "" && store.HolderDead(r.Holder) {
			// Its lease is let go now, so that the next holder takes it.
			if err := st.Break(ctx, r.ID, r.Holder); err != nil && !errors.Is(err, store.ErrLeaseLost) {
				return nil, err
			}
			runs[i].Holder = ""
		}
	}
	return runs, nil
}

// Millis is d in milliseconds to the microsecond, as records and Results
// give durations.
func Millis(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

// AbsDir makes a directory a start record keeps absolute, so that a
// resume from elsewhere finds it; "" stays "".
func AbsDir(dir string) string {
	if dir == "" {
		return ""
	}
	if a, err := filepath.Abs(dir); err == nil {
		return a
	}
	return dir
}

// JSON encodes a record. Every record type encodes; a value inside one
// that does not is reported in its place, not lost.
func JSON(v any) json.RawMessage {
	b, err := json.Marshal(v)
	if err != nil {
		b, _ = json.Marshal(map[string]string{"unencodable": err.Error()})
	}
	return b
}

// NewResponse is r as the log keeps it; nil for nil.
func NewResponse(r *llm.Response) *runlog.Response {
	if r == nil {
		return nil
	}
	out := &runlog.Response{Content: r.Content, Usage: r.Usage, Model: r.Model, Provider: r.Provider, FinishReason: r.FinishReason}
	for _, c := range r.ToolCalls {
		out.ToolCalls = append(out.ToolCalls, runlog.ToolCall{ID: c.ID, Name: c.Name, Arguments: string(c.Arguments), Signature: c.Signature})
	}
	return out
}

// NewToolResult is the record of call, which returned out or err after
// starting at start.
func NewToolResult(call *tool.Call, out tool.Output, err error, start time.Time) runlog.ToolResult {
	rec := runlog.ToolResult{CallID: call.ID, Tool: call.Name, Arguments: string(call.Arguments), Observation: out.Observation,
		Attempts: call.Attempt, DurationMS: Millis(time.Since(start)), StartedAt: start}
	if err != nil {
		rec.Observation = ""
		rec.Error = tool.DetailsFrom(err, true)
	} else if out.JSON != nil {
		o := string(out.JSON)
		rec.Output = &o
	}
	return rec
}
