package agent

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/agentry/agentry/event"
	"github.com/agentry/agentry/store"
)

// storedLog is a run's log read back: what a resume or a replay serves
// instead of calling again.
type storedLog struct {
	run     store.Run
	start   startRecord
	calls   []modelRecord
	intents map[string]*intentRecord
	results map[string]*resultRecord
	// byArgs holds the latest result of each tool and arguments: what
	// a call the original run answered from its cache is answered with.
	byArgs map[string]*resultRecord
	// result is the final Result, when the run ended.
	result json.RawMessage
	// attempts is how many model attempts the recorded calls took.
	attempts int
	// lastTurn is the turn of the last recorded model call.
	lastTurn int
	// events are the run's events, those a resume superseded left out.
	events []store.Record
	// approvals are the calls that waited for a person, by key; decided
	// what resumes decided, by call id or key (true: approved).
	approvals  map[string]*approvalRecord
	decided    map[string]bool
	denyReason string
	// For ReadRunLog: each call's turn, each tool call's turn and place,
	// and the turns resumes took over at.
	callTurns []int
	turns     map[string]int
	order     map[string]int
	resumes   []int
}

// readLog reads and decodes the log of runID.
func readLog(ctx context.Context, st store.Store, runID string) (*storedLog, error) {
	run, err := st.Get(ctx, runID)
	if err != nil {
		return nil, err
	}
	recs, err := st.Records(ctx, runID, 0)
	if err != nil {
		return nil, err
	}
	l := &storedLog{run: run, intents: map[string]*intentRecord{}, results: map[string]*resultRecord{}, byArgs: map[string]*resultRecord{},
		turns: map[string]int{}, order: map[string]int{}, approvals: map[string]*approvalRecord{}, decided: map[string]bool{}}
	for i := range recs {
		if err := l.add(&recs[i]); err != nil {
			return nil, fmt.Errorf("run %s: %w", runID, err)
		}
	}
	if l.start.RunID == "" {
		return nil, fmt.Errorf("run %s: its log has no start record", runID)
	}
	return l, nil
}

// agentRun refuses a run that is not an agent's (a pipeline's) where an
// agent's is needed.
func (l *storedLog) agentRun() error {
	if l.start.Kind != "agent" {
		return fmt.Errorf("%w: run %s is a %s's, not an agent's", ErrNotResumable, l.start.RunID, l.start.Kind)
	}
	return nil
}

func (l *storedLog) add(rec *store.Record) error {
	if err := store.CheckFormat(rec); err != nil {
		return err
	}
	var err error
	switch rec.Kind {
	case store.KindStart:
		err = json.Unmarshal(rec.Data, &l.start)
	case store.KindModelCall:
		var m modelRecord
		if err = json.Unmarshal(rec.Data, &m); err == nil {
			l.calls = append(l.calls, m)
			l.callTurns = append(l.callTurns, rec.Turn)
			l.attempts += max(m.Attempts, 1)
			l.lastTurn = rec.Turn
		}
	case store.KindToolIntent:
		var in intentRecord
		if err = json.Unmarshal(rec.Data, &in); err == nil {
			l.intents[rec.Key] = &in
			l.place(rec)
		}
	case store.KindToolResult:
		var res resultRecord
		if err = json.Unmarshal(rec.Data, &res); err == nil {
			l.results[rec.Key] = &res
			l.place(rec)
			l.byArgs[res.Tool+"\x00"+res.Arguments] = &res
		}
	case store.KindEvent:
		l.events = append(l.events, *rec)
	case store.KindApproval:
		var a approvalRecord
		if err = json.Unmarshal(rec.Data, &a); err == nil {
			l.approvals[rec.Key] = &a
		}
	case store.KindResume:
		var rr resumeRecord
		if err = json.Unmarshal(rec.Data, &rr); err != nil {
			break
		}
		// Decisions are written by key; a log of an older release may
		// hold call ids, bound here as Resume binds them, or dropped
		// (the call asks again) when they name no single waiting call.
		w := l.waiting()
		for _, id := range rr.Approved {
			if key, ok := bindOne(w, id); ok {
				l.decided[key] = true
			}
		}
		for _, id := range rr.Denied {
			if key, ok := bindOne(w, id); ok {
				l.decided[key] = false
			}
		}
		if rr.Reason != "" {
			l.denyReason = rr.Reason
		}
		// The resumed run wrote the events of its first turn again.
		kept := l.events[:0]
		for _, e := range l.events {
			if e.Turn < rec.Turn {
				kept = append(kept, e)
			}
		}
		l.events = kept
		l.result = nil
		l.resumes = append(l.resumes, rec.Turn)
	case store.KindResult:
		l.result = rec.Data
	}
	if err != nil {
		return fmt.Errorf("record %d (%s): %w", rec.Seq, rec.Kind, err)
	}
	return nil
}

// bindOne returns the key of the one waiting call id names (a key, or a
// call id).
func bindOne(w map[string]string, id string) (string, bool) {
	if _, ok := w[id]; ok {
		return id, true
	}
	key, n := "", 0
	for k, cid := range w {
		if cid == id {
			key, n = k, n+1
		}
	}
	return key, n == 1
}

// place notes where a tool call first appears in the log.
func (l *storedLog) place(rec *store.Record) {
	if _, ok := l.order[rec.Key]; !ok {
		l.order[rec.Key] = len(l.order)
		l.turns[rec.Key] = rec.Turn
	}
}

// Events decodes the run's events, in order.
func (l *storedLog) Events() ([]event.Event, error) {
	out := make([]event.Event, 0, len(l.events))
	for _, rec := range l.events {
		var e event.Event
		if err := json.Unmarshal(rec.Data, &e); err != nil {
			return nil, fmt.Errorf("record %d (event): %w", rec.Seq, err)
		}
		out = append(out, e)
	}
	return out, nil
}
