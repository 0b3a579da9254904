package runlog

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"

	"github.com/agentry/agentry/event"
	"github.com/agentry/agentry/store"
	"github.com/agentry/agentry/tool"
)

// Log is a run's log read back: what trace prints, and what a resume or
// a replay serves instead of calling again.
type Log struct {
	Run   store.Run
	Start Start
	// SealedRecords counts the log's sealed records (Sealed): a writer
	// that goes on with the run numbers its own after them.
	SealedRecords uint64
	// ModelCalls are the model calls in order, and CallTurns the turn of each.
	ModelCalls []ModelCall
	CallTurns  []int
	// Intents and Results are the tool calls by idempotency key.
	Intents map[string]*Intent
	Results map[string]*ToolResult
	// Approvals are the calls that waited for a person, by key; Decided
	// what resumes decided, by key (true: approved), and DenyReason the
	// last reason given for a denial.
	Approvals  map[string]*Approval
	Decided    map[string]bool
	DenyReason string
	// Result is the final Result as stored, nil when the run has not
	// ended (or a resume superseded it).
	Result json.RawMessage
	// Attempts is how many model attempts the recorded calls took, and
	// LastTurn the turn of the last recorded model call.
	Attempts int
	LastTurn int
	// Resumes are the turns resumes took over at (not counting a
	// dispatched run going on after its calls ran).
	Resumes []int
	// events are the run's events, those a resume superseded left out.
	events []store.Record
	// byArgs holds the latest result of each tool and arguments.
	byArgs map[string]*ToolResult
	// turns and order are each tool call's turn and first place.
	turns map[string]int
	order map[string]int
}

// Read reads and decodes the log of runID.
func Read(ctx context.Context, st store.Store, runID string, opts ...Option) (*Log, error) {
	var c config
	for _, o := range opts {
		o(&c)
	}
	run, err := st.Get(ctx, runID)
	if err != nil {
		return nil, err
	}
	recs, err := st.Records(ctx, runID, 0)
	if err != nil {
		return nil, err
	}
	l := &Log{Run: run, Intents: map[string]*Intent{}, Results: map[string]*ToolResult{}, byArgs: map[string]*ToolResult{},
		turns: map[string]int{}, order: map[string]int{}, Approvals: map[string]*Approval{}, Decided: map[string]bool{}}
	o := opener{s: c.seal, runID: runID}
	for i := range recs {
		if err := o.open(&recs[i]); err != nil {
			return nil, fmt.Errorf("run %s: %w", runID, err)
		}
		if err := l.add(&recs[i]); err != nil {
			return nil, fmt.Errorf("run %s: %w", runID, err)
		}
	}
	l.SealedRecords = o.n
	if l.Start.RunID == "" {
		return nil, fmt.Errorf("run %s: its log has no start record", runID)
	}
	return l, nil
}

func (l *Log) add(rec *store.Record) error {
	if err := store.CheckFormat(rec); err != nil {
		return err
	}
	var err error
	switch rec.Kind {
	case store.KindStart:
		err = json.Unmarshal(rec.Data, &l.Start)
	case store.KindModelCall:
		var m ModelCall
		if err = json.Unmarshal(rec.Data, &m); err == nil {
			l.ModelCalls = append(l.ModelCalls, m)
			l.CallTurns = append(l.CallTurns, rec.Turn)
			l.Attempts += max(m.Attempts, 1)
			l.LastTurn = rec.Turn
		}
	case store.KindToolIntent:
		var in Intent
		if err = json.Unmarshal(rec.Data, &in); err == nil {
			l.Intents[rec.Key] = &in
			l.place(rec)
		}
	case store.KindToolResult:
		var res ToolResult
		if err = json.Unmarshal(rec.Data, &res); err == nil {
			l.Results[rec.Key] = &res
			l.place(rec)
			l.byArgs[res.Tool+"\x00"+res.Arguments] = &res
		}
	case store.KindEvent:
		l.events = append(l.events, *rec)
	case store.KindApproval:
		var a Approval
		if err = json.Unmarshal(rec.Data, &a); err == nil {
			l.Approvals[rec.Key] = &a
		}
	case store.KindResume:
		err = l.resume(rec)
	case store.KindResult:
		l.Result = rec.Data
	}
	if err != nil {
		return fmt.Errorf("record %d (%s): %w", rec.Seq, rec.Kind, err)
	}
	return nil
}

func (l *Log) resume(rec *store.Record) error {
	var rr Resume
	if err := json.Unmarshal(rec.Data, &rr); err != nil {
		return err
	}
	// Decisions are written by key; a log of an older release may hold
	// call ids, bound here as a resume binds them, or dropped (the call
	// asks again) when they name no single waiting call.
	w := l.Waiting()
	for _, id := range rr.Approved {
		if key, ok := bindOne(w, id); ok {
			l.Decided[key] = true
		}
	}
	for _, id := range rr.Denied {
		if key, ok := bindOne(w, id); ok {
			l.Decided[key] = false
		}
	}
	if rr.Reason != "" {
		l.DenyReason = rr.Reason
	}
	// The resumed run writes the events of its first turn again.
	kept := l.events[:0]
	for _, e := range l.events {
		if e.Turn < rec.Turn {
			kept = append(kept, e)
		}
	}
	l.events = kept
	l.Result = nil
	if !rr.Dispatched {
		l.Resumes = append(l.Resumes, rec.Turn)
	}
	return nil
}

// bindOne returns the key of the one waiting call id names (a key, or a
// call id).
func bindOne(w map[string]string, id string) (string, bool) {
	if keys := Named(w, id); len(keys) == 1 {
		return keys[0], true
	}
	return "", false
}

// Named returns the keys of the waiting calls (as Waiting returns them)
// that id names: id itself when it is a key, else the keys of the calls
// whose model's call id it is, sorted. Call ids repeat across turns, so
// a call id may name several.
func Named(waiting map[string]string, id string) []string {
	if _, ok := waiting[id]; ok {
		return []string{id}
	}
	var keys []string
	for k, cid := range waiting {
		if cid == id {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	return keys
}

// place notes where a tool call first appears in the log.
func (l *Log) place(rec *store.Record) {
	if _, ok := l.order[rec.Key]; !ok {
		l.order[rec.Key] = len(l.order)
		l.turns[rec.Key] = rec.Turn
	}
}

// Waiting returns the calls of the log that wait for a decision, by
// idempotency key, with their call ids: non-idempotent calls sent
// without a recorded result, and calls the approval rule held back that
// have no result yet.
func (l *Log) Waiting() map[string]string {
	w := map[string]string{}
	for key, in := range l.Intents {
		if _, done := l.Results[key]; !done {
			w[key] = in.CallID
		}
	}
	for key, a := range l.Approvals {
		if _, done := l.Results[key]; !done {
			w[key] = a.CallID
		}
	}
	return w
}

// Latest returns the latest recorded result of tool with args, if any:
// what a call the original run answered from its cache is answered with.
func (l *Log) Latest(tool, args string) (*ToolResult, bool) {
	res, ok := l.byArgs[tool+"\x00"+args]
	return res, ok
}

// Events decodes the run's events, in order.
func (l *Log) Events() ([]event.Event, error) {
	out := make([]event.Event, 0, len(l.events))
	for _, rec := range l.events {
		var e event.Event
		if err := json.Unmarshal(rec.Data, &e); err != nil {
			return nil, fmt.Errorf("record %d (event): %w", rec.Seq, err)
		}
		e.Seq = uint64(rec.Seq) // a stored event's one number: its place in the log
		out = append(out, e)
	}
	return out, nil
}

// Call is a tool call of a stored run: its result, or only its intent
// when the run stopped while it was in flight.
type Call struct {
	Turn      int
	Key       string
	CallID    string
	Tool      string
	Arguments json.RawMessage
	// Output is the tool's result, Error its failure; both are empty
	// when Pending.
	Output     json.RawMessage
	Error      *tool.ErrorDetails
	DurationMS float64
	// Pending is a non-idempotent call whose intent is on record but not
	// its result.
	Pending bool
}

// ToolCalls returns the run's tool calls in the order they appear.
func (l *Log) ToolCalls() []Call {
	var out []Call
	for key, in := range l.Intents {
		if _, done := l.Results[key]; !done {
			out = append(out, Call{Turn: l.turns[key], Key: key, CallID: in.CallID, Tool: in.Tool,
				Arguments: json.RawMessage(in.Arguments), Pending: true})
		}
	}
	for key, res := range l.Results {
		c := Call{Turn: l.turns[key], Key: key, CallID: res.CallID, Tool: res.Tool, Arguments: json.RawMessage(res.Arguments),
			Error: res.Error, DurationMS: res.DurationMS}
		if res.Output != nil {
			c.Output = json.RawMessage(*res.Output)
		}
		out = append(out, c)
	}
	sort.Slice(out, func(i, j int) bool { return l.order[out[i].Key] < l.order[out[j].Key] })
	return out
}

// Driver returns what drives the stored run runID when it is not one
// process (its start record's Driver, drive.Plan.Driver): "" for a local
// run, or a run whose log cannot be read (a resume then says why). A
// sealed log is opened with opts' key (Sealed).
func Driver(ctx context.Context, st store.Store, runID string, opts ...Option) string {
	recs, err := st.Records(ctx, runID, 0)
	if err != nil || len(recs) == 0 || recs[0].Kind != store.KindStart {
		return ""
	}
	if _, sealed := sealedBody(recs[0].Data); sealed {
		var c config
		for _, o := range opts {
			o(&c)
		}
		if c.seal == nil || NewOpener(c.seal, runID).Open(&recs[0]) != nil {
			return "" // no key to open it: a resume says so
		}
	}
	var start struct {
		Driver string `json:"driver"`
	}
	json.Unmarshal(recs[0].Data, &start)
	return start.Driver
}

// Option configures Read.
type Option func(*config)

type config struct{ seal *Sealer }

// Sealed makes Read open a sealed log's records with s (see Sealer). A
// log read with a key holds only sealed records; one read without a key
// must hold none.
func Sealed(s *Sealer) Option { return func(c *config) { c.seal = s } }
