// Package store keeps runs durable: each run, its append-only log (the
// spec it ran, its input, every model call with the full response, every
// tool call's intent and result, its events and its Result) and the lease
// that says which process drives it. The log is the run's only truth: it
// is what a trace prints, a replay plays and a resume rebuilds the
// session from.
//
// The interfaces are small, one per role: Runs (create, find, list,
// prune), Log (append, read), Leases (who drives a run) and Audit (the
// policy layer's hash-chained audit log). A backend
// implements all four as a Store; backends register with Register in
// the manner of database/sql drivers, and Open picks one by the form of
// its data source name. Two ship with agentry: store/sqlite (one file,
// pure Go, the embedded default) and store/postgres (the server backend).
// Both pass the same conformance suite, store/storetest.
package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/agentry/agentry/internal/registry"
)

// Format is the version of the records this release writes. A reader
// refuses a record of a format it does not know instead of misreading it.
const Format = "agentry.log/v1"

// Status is where a run stands.
type Status string

// The statuses of a run.
const (
	Running          Status = "running"
	Completed        Status = "completed"
	Failed           Status = "failed"
	Aborted          Status = "aborted"
	AwaitingApproval Status = "awaiting_approval"
	// Interrupted is a run whose process died: its lease expired, or its
	// holder is found dead. Stores report it; nobody writes it as an end.
	Interrupted Status = "interrupted"
)

// Valid reports whether s is one of the statuses.
func (s Status) Valid() bool {
	switch s {
	case Running, Completed, Failed, Aborted, AwaitingApproval, Interrupted:
		return true
	}
	return false
}

// Resumable reports whether a run in this status can be resumed.
func (s Status) Resumable() bool { return s == Interrupted || s == AwaitingApproval }

// Run is a stored run as the runs table holds it: who it is, where it
// stands, who drives it and, once it ended, a summary.
type Run struct {
	ID string
	// Kind is "agent", "pipeline" or "eval" (an evaluation, whose runs
	// are its children).
	Kind string
	// Name and Version are the agent's (or the pipeline's).
	Name, Version string
	// ParentID is the run this one is part of, if any.
	ParentID  string
	SessionID string
	// Conversation is the conversation the run is part of, if any
	// (Conversations): created with it, the run starts from its history.
	Conversation string
	// HistoryOf is, for a run created in a conversation, the run whose
	// history it read (Conversations.History's RunID; "" for none): the
	// store refuses the run (ErrStaleHistory) when another run's history
	// is newer by then, so that no run starts without what was said last.
	HistoryOf string
	// User is the run's owner: the user it was created for (its start
	// record's user). "" is the local operator's: a run made with no
	// user named, or stored before runs had owners.
	User   string
	Status Status
	// Holder is the process driving the run ("" when none does) and
	// LeaseUntil when its lease runs out unless renewed.
	Holder     string
	LeaseUntil time.Time
	CreatedAt  time.Time
	UpdatedAt  time.Time
	Summary
}

// Summary is what a finished (or paused) run reports for listings.
type Summary struct {
	Outcome string
	Turns   int
	Tokens  int
	// CostUSD is nil when a model of the run had no price.
	CostUSD *float64
	// Error is the run's error message, if it failed.
	Error string
}

// Kind names what a log record holds.
type Kind string

// The kinds of log records.
const (
	// KindStart opens a run's log: the spec as it ran, its input and how
	// it was run (model, directories, ids).
	KindStart Kind = "start"
	// KindModelCall is one model call: the request's digest and the full
	// response (or the error).
	KindModelCall Kind = "model_call"
	// KindToolIntent is a tool call about to run. It is committed before
	// a non-idempotent call runs.
	KindToolIntent Kind = "tool_intent"
	// KindToolResult is a finished tool call.
	KindToolResult Kind = "tool_result"
	// KindEvent is one event of the run, as its JSON.
	KindEvent Kind = "event"
	// KindApproval is a call that waits for a person's approval (the
	// policy's approval rule).
	KindApproval Kind = "approval"
	// KindResume marks where a resumed run took over.
	KindResume Kind = "resume"
	// KindResult is the run's final Result.
	KindResult Kind = "result"
)

// Record is one entry of a run's log.
type Record struct {
	// Seq orders a run's records; the store assigns it on Append.
	Seq  int64
	Kind Kind
	// Format is the version of Data's shape; Append fills in Format.
	Format string
	// Turn is the loop turn the record belongs to (0 before the first).
	Turn int
	// Key is a tool call's idempotency key (RUN_ID:TURN:INDEX).
	Key  string
	Time time.Time
	// Data is the record itself, as JSON.
	Data json.RawMessage
}

// Write is one atomic change to a run: records appended to its log and,
// optionally, its status, summary and lease. It is refused with
// ErrLeaseLost when Holder no longer holds the run's lease, so a process
// that lost its run can never write into it.
type Write struct {
	RunID  string
	Holder string
	// Create, when set, creates the run (as Runs.Create: ErrExists for
	// an id taken) in the same transaction as Records: a run is never on
	// record without its first records. Its Holder must be Holder.
	Create *Run
	// Records are appended in order.
	Records []Record
	// Status, when set, becomes the run's status.
	Status Status
	// Summary, when set, replaces the run's summary.
	Summary *Summary
	// Release gives up the lease.
	Release bool
}

// Filter selects runs for List. Zero fields select everything.
type Filter struct {
	// Kind is "agent", "pipeline" or "eval" (an evaluation).
	Kind string
	// NotKind leaves out the runs of a kind: a listing of runs leaves
	// out the evaluations, which are listed on their own.
	NotKind  string
	Name     string
	Status   Status
	ParentID string
	// Conversation selects the runs of one conversation.
	Conversation string
	// User selects one user's runs ("": every user's, the local
	// operator's among them).
	User string
	// Since and Until bound when the runs were created: at or after
	// Since, before Until (zero: unbounded).
	Since, Until time.Time
	// Cursor is the id of the last run of the page before: the runs that
	// follow it in the listing, newest first ("": from the newest).
	Cursor string
	// Limit caps the number of runs (newest first); 0 means 100.
	Limit int
}

// Runs creates, finds, lists and prunes runs.
type Runs interface {
	// Create adds a run. A run with Holder set is created leased to it
	// until LeaseUntil. An id already taken is ErrExists.
	Create(ctx context.Context, run Run) error
	// Get returns the run with that id, or ErrNotFound. A running run
	// whose lease ran out, or whose holder is found dead (HolderDead),
	// is reported Interrupted, and List by status keeps it so.
	Get(ctx context.Context, id string) (Run, error)
	// List returns runs matching f, newest first.
	List(ctx context.Context, f Filter) ([]Run, error)
	// Prune deletes runs created before t that are not running, with
	// their logs, and returns how many it deleted.
	Prune(ctx context.Context, before time.Time) (int, error)
}

// Log appends to and reads runs' logs.
type Log interface {
	// Append applies w in one transaction.
	Append(ctx context.Context, w Write) error
	// Records returns the run's records with Seq above after, in order.
	Records(ctx context.Context, runID string, after int64) ([]Record, error)
}

// Leases decide which process drives a run.
type Leases interface {
	// Acquire leases the run to holder for ttl: when nobody holds it, its
	// lease ran out, or holder holds it already. Otherwise it returns a
	// *HeldError. It does not change the run's status.
	Acquire(ctx context.Context, runID, holder string, ttl time.Duration) error
	// Renew extends holder's lease by ttl from now, or returns
	// ErrLeaseLost when holder no longer holds it.
	Renew(ctx context.Context, runID, holder string, ttl time.Duration) error
	// Break frees a lease that holder holds (a holder known to be dead)
	// and marks a running run Interrupted; a lease since taken by another
	// holder is left alone (ErrLeaseLost).
	Break(ctx context.Context, runID, holder string) error
}

// Store is a backend: every role, and Close.
type Store interface {
	Runs
	Log
	Leases
	Audit
	io.Closer
}

// Watcher is what a store that tells of its own writes can do: a reader
// that follows a run's log as it grows (an event stream) waits for the
// next write instead of asking again and again. It hears the writes of
// this process only; another process's are found by asking.
type Watcher interface {
	// Watch returns a channel that receives after writes to runID's
	// log or status (several writes may make one receive), and a func
	// that ends the watch.
	Watch(runID string) (<-chan struct{}, func())
}

// KindReader is what a store that reads part of a run's log can do:
// what a chat shows of each run (its start and its result) is read
// without the rest (its events, its calls, its history).
type KindReader interface {
	// RecordsOf returns the run's records of the kinds named, in order.
	// A run that does not exist is ErrNotFound.
	RecordsOf(ctx context.Context, runID string, kinds ...Kind) ([]Record, error)
}

// Pins is what a store that remembers agent versions can do: the first
// run of NAME@VERSION pins the digest of what defines the version (its
// output schema), and a later run with another digest is refused, so
// that a version changed in place is caught with no lock file. The SQL
// backends have it; a store without it pins nothing.
type Pins interface {
	// Pin records digest for name at version unless one is recorded, and
	// returns the digest recorded (digest itself the first time).
	Pin(ctx context.Context, name, version, digest string) (string, error)
}

// Blobs is what a store that keeps opaque values by key can do: the
// payloads a durable-execution engine keeps out of its history (a Temporal
// run's large results), each written once under the digest of its bytes.
// The SQL backends have it; Prune deletes the blobs written before its
// cutoff.
type Blobs interface {
	// PutBlob keeps data under key; a key kept already keeps its data.
	PutBlob(ctx context.Context, key string, data []byte) error
	// Blob returns the data kept under key, or ErrNotFound.
	Blob(ctx context.Context, key string) ([]byte, error)
}

// Errors of the store, matched with errors.Is.
var (
	ErrNotFound  = errors.New("store: run not found")
	ErrExists    = errors.New("store: run already exists")
	ErrLeaseLost = errors.New("store: lease lost")
	ErrHeld      = errors.New("store: run is held by another process")
	// ErrFormat is wrapped by the error of a record whose format this
	// release cannot read.
	ErrFormat = errors.New("store: unknown record format")
	// ErrAuditBroken is matched by the error of VerifyAudit and VerifyChain
	// on a chain that was edited, cut or reordered.
	ErrAuditBroken = errors.New("store: the audit chain is broken")
)

// HeldError says who holds a run's lease, and until when.
type HeldError struct {
	RunID  string
	Holder string
	Until  time.Time
}

func (e *HeldError) Error() string {
	return fmt.Sprintf("store: run %s is held by %s until %s", e.RunID, e.Holder, e.Until.UTC().Format(time.RFC3339))
}

// Is makes errors.Is(err, ErrHeld) true.
func (e *HeldError) Is(target error) bool { return target == ErrHeld }

// Driver opens a store from a data source name.
type Driver func(ctx context.Context, dsn string) (Store, error)

var drivers registry.Registry[Driver]

// Register makes a backend available to Open under name ("sqlite",
// "postgres"). It panics when name is taken, as database/sql does.
func Register(name string, d Driver) {
	if !drivers.Add(name, d) {
		panic("store: Register called twice for " + name)
	}
}

// Drivers returns the names of the registered backends, sorted.
func Drivers() []string { return drivers.Names() }

// Open opens the store dsn names: a postgres:// or postgresql:// URL is
// the "postgres" backend; anything else is a SQLite file path (with an
// optional "sqlite:" prefix). The backend's package must be imported.
// Migrations run on open.
func Open(ctx context.Context, dsn string) (Store, error) {
	name, rest := "sqlite", dsn
	switch {
	case dsn == "":
		return nil, errors.New("store: empty data source name; give a SQLite file path or a postgres:// URL")
	case strings.HasPrefix(dsn, "postgres://"), strings.HasPrefix(dsn, "postgresql://"):
		name = "postgres"
	case strings.HasPrefix(dsn, "sqlite:"):
		rest = strings.TrimPrefix(dsn, "sqlite:")
	}
	d, ok := drivers.Get(name)
	if !ok {
		registered := strings.Join(Drivers(), ", ")
		if registered == "" {
			registered = "none"
		}
		return nil, fmt.Errorf("store: no %s backend is registered (import github.com/agentry/agentry/store/%s; registered: %s)",
			name, name, registered)
	}
	return d(ctx, rest)
}

// CheckFormat returns an error wrapping ErrFormat unless r is in a format
// this release reads.
func CheckFormat(r *Record) error {
	if r.Format != Format {
		return fmt.Errorf("%w %q in record %d (%s) of the run; this release reads %q", ErrFormat, r.Format, r.Seq, r.Kind, Format)
	}
	return nil
}
