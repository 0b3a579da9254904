package server

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/agentry/agentry/runlog"
	"github.com/agentry/agentry/store"
)

// How the event stream polls the store, keeps a quiet stream open, and
// gives up on a client that stopped reading.
const (
	pollEvery = 50 * time.Millisecond
	// watchedPollEvery is how often a stream asks a store that tells of
	// its own writes (store.Watcher) for another process's.
	watchedPollEvery = 500 * time.Millisecond
	heartbeatEvery   = 15 * time.Second
	writeTimeout     = 30 * time.Second
)

// events streams a run's events as server-sent events, cut from the run
// store: each event's id is its sequence number in the run's log, so a
// client that sends Last-Event-ID gets exactly the events after it, from
// this server or another, before a restart or after. A resume is a
// "resume" event, after which the resumed turn's events come again. The
// stream closes after the run's last run_end (or once the run has
// stopped and its log is read to the end); ": heartbeat" comments keep a
// quiet one open. A slow client never
// slows the run: it reads the store at its own pace.
func (s *Server) events(w http.ResponseWriter, r *http.Request) {
	run, ok := s.storedRun(w, r)
	if !ok {
		return
	}
	var after int64
	if last := r.Header.Get("Last-Event-ID"); last != "" {
		n, err := strconv.ParseInt(last, 10, 64)
		if err != nil || n < 0 {
			writeError(w, http.StatusBadRequest, "invalid_request", fmt.Sprintf("Last-Event-ID %q is not an event id", last))
			return
		}
		after = n
	}
	if !s.takeStream(w) {
		return
	}
	defer s.releaseStream()
	rc := http.NewResponseController(w)
	// flush sends what is written, and gives the client writeTimeout to
	// take it: one that stopped reading without going away is let go
	// (it resumes with Last-Event-ID); the run never waits for it.
	flush := func() bool {
		rc.SetWriteDeadline(time.Now().Add(writeTimeout))
		return rc.Flush() == nil
	}
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	h.Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	if !flush() {
		return // the connection cannot stream, or the client is gone
	}
	ctx := r.Context()
	// A store that tells of its writes wakes the stream when this
	// process writes the run; the store is asked again, less often, for
	// another process's writes.
	every, changed := pollEvery, (<-chan struct{})(nil)
	if wt, ok := s.cfg.Store.(store.Watcher); ok {
		var stop func()
		changed, stop = wt.Watch(run.ID)
		defer stop()
		every = watchedPollEvery
	}
	poll := time.NewTicker(every)
	defer poll.Stop()
	quietSince := time.Now()
	closing := s.closing
	// A sealed log opens from its first record: with a key, read from
	// there, and write what comes after the client's last event. Without
	// one, a sealed record ends the stream.
	open := runlog.NewOpener(s.seal, run.ID)
	last, read := after, after
	if s.seal != nil {
		read = 0
	}
	for {
		recs, err := s.cfg.Store.Records(ctx, run.ID, read)
		if err != nil {
			return // the client went away, or the store failed: the client resumes
		}
		for i := range recs {
			rec := &recs[i]
			read = rec.Seq
			if err := open.Open(rec); err != nil {
				fmt.Fprintf(w, ": %s\n\n", strings.ReplaceAll(err.Error(), "\n", " "))
				return
			}
			if rec.Seq <= last {
				continue
			}
			switch rec.Kind {
			case store.KindResume:
				writeResume(w, run.ID, rec)
				continue
			case store.KindEvent:
			default:
				continue
			}
			h := headOf(rec.Data)
			fmt.Fprintf(w, "id: %d\nevent: %s\ndata: %s\n\n", rec.Seq, h.Type, bytes.TrimSpace(rec.Data))
			quietSince = time.Now()
			if h.Type == "run_end" && h.RunID == run.ID && !resumedIn(recs[i+1:]) {
				flush()
				return
			}
		}
		if len(recs) > 0 {
			if !flush() {
				return
			}
		} else if cur, err := s.cfg.Store.Get(ctx, run.ID); err == nil && cur.Status != store.Running && !s.driving(run.ID) {
			// Stopped without a run_end of its own (refused, interrupted):
			// read to the end once more, then close. A run this server
			// has just resumed is not stopped, though its log may not say
			// so yet.
			if more, err := s.cfg.Store.Records(ctx, run.ID, read); err == nil && len(more) == 0 {
				return
			}
		}
		if time.Since(quietSince) >= s.heartbeat {
			fmt.Fprint(w, ": heartbeat\n\n")
			if !flush() {
				return
			}
			quietSince = time.Now()
		}
		select {
		case <-ctx.Done():
			return
		case <-closing:
			if !s.driving(run.ID) {
				return // the server stops, and another process drives the run: the client resumes elsewhere
			}
			closing = nil // the server's own run: its stream ends as it stops
		case <-poll.C:
		case <-changed:
		}
	}
}

// writeResume writes the mark a resume left in the log as a "resume"
// event: the run went on from this turn, and its events of this turn and
// after, written before the pause, are superseded by those that follow
// (the resumed run writes its first turn's events again).
func writeResume(w http.ResponseWriter, runID string, rec *store.Record) {
	data, _ := json.Marshal(map[string]any{"type": "resume", "run_id": runID, "turn": rec.Turn, "time": rec.Time})
	fmt.Fprintf(w, "id: %d\nevent: resume\ndata: %s\n\n", rec.Seq, data)
}

// resumedIn says whether recs hold a resume: a run_end before it ended a
// pause, not the run.
func resumedIn(recs []store.Record) bool {
	for _, r := range recs {
		if r.Kind == store.KindResume {
			return true
		}
	}
	return false
}

// head is what the stream reads of an event: its type, and its run (a
// sub-agent's events are in its parent's log, and its run_end does not
// end its parent's stream).
type head struct {
	Type  string `json:"type"`
	RunID string `json:"run_id"`
}

// headOf reads an event's head; an event without a type is a "message".
func headOf(data json.RawMessage) head {
	var h head
	json.Unmarshal(data, &h)
	if h.Type == "" {
		h.Type = "message"
	}
	return h
}
