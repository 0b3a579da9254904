package server

import (
	"bytes"
	"context"
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
	st := &eventStream{s: s, w: w, rc: http.NewResponseController(w), runID: run.ID, last: after, read: after,
		open: runlog.NewOpener(s.seal, run.ID)}
	if s.seal != nil {
		// A sealed log opens from its first record: with a key, read from
		// there, and write what comes after the client's last event.
		// Without one, a sealed record ends the stream.
		st.read = 0
	}
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	h.Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	if st.flush() { // false: the connection cannot stream, or the client is gone
		st.follow(r.Context())
	}
}

// eventStream is one client's stream of a run's events.
type eventStream struct {
	s          *Server
	w          http.ResponseWriter
	rc         *http.ResponseController
	runID      string
	last       int64 // the client's last event
	read       int64 // the last record read
	open       *runlog.Opener
	quietSince time.Time
}

// flush sends what is written, and gives the client writeTimeout to
// take it: one that stopped reading without going away is let go (it
// resumes with Last-Event-ID); the run never waits for it.
func (st *eventStream) flush() bool {
	st.rc.SetWriteDeadline(time.Now().Add(writeTimeout))
	return st.rc.Flush() == nil
}

// follow writes the run's events as its log grows, until the run ends,
// the client goes, or the server stops and another process drives it.
func (st *eventStream) follow(ctx context.Context) {
	s := st.s
	// A store that tells of its writes wakes the stream when this
	// process writes the run; the store is asked again, less often, for
	// another process's writes.
	every, changed := pollEvery, (<-chan struct{})(nil)
	if wt, ok := s.cfg.Store.(store.Watcher); ok {
		var stop func()
		changed, stop = wt.Watch(st.runID)
		defer stop()
		every = watchedPollEvery
	}
	poll := time.NewTicker(every)
	defer poll.Stop()
	st.quietSince = time.Now()
	closing := s.closing
	var chunks <-chan []byte // a chat's answer as it is written, while this server drives it
	if rl := s.relayOf(st.runID); rl != nil {
		var stop func()
		chunks, stop = rl.subscribe(st.runID)
		defer stop()
	}
	for chunked := false; ; {
		if !st.relayed(chunks) {
			return
		}
		if done := !chunked && st.next(ctx); done { // a chunk wakes the stream, not the store
			return
		}
		chunked = false
		select {
		case data := <-chunks:
			fmt.Fprintf(st.w, "event: content_chunk\ndata: %s\n\n", data)
			if !st.flush() {
				return
			}
			chunked = true
		case <-ctx.Done():
			return
		case <-closing:
			if !s.driving(st.runID) {
				return // the server stops, and another process drives the run: the client resumes elsewhere
			}
			closing = nil // the server's own run: its stream ends as it stops
		case <-poll.C:
		case <-changed:
		}
	}
}

// relayed writes the chunks that wait (before the log's next records,
// which came after them); false when the client is gone.
func (st *eventStream) relayed(chunks <-chan []byte) bool {
	for wrote := false; ; {
		select {
		case data := <-chunks:
			fmt.Fprintf(st.w, "event: content_chunk\ndata: %s\n\n", data)
			wrote = true
		default:
			return !wrote || st.flush()
		}
	}
}

// next writes what the log holds after the last record read; true when
// the stream is over (the run ended, or the client or the store failed:
// the client resumes).
func (st *eventStream) next(ctx context.Context) bool {
	s := st.s
	recs, err := s.cfg.Store.Records(ctx, st.runID, st.read)
	if err != nil {
		return true
	}
	for i := range recs {
		if st.write(&recs[i]) && !resumedIn(recs[i+1:]) {
			st.flush()
			return true
		}
		if st.open == nil {
			return true
		}
	}
	if len(recs) > 0 {
		if !st.flush() {
			return true
		}
	} else if cur, err := s.cfg.Store.Get(ctx, st.runID); err == nil && cur.Status != store.Running && !s.driving(st.runID) {
		// Stopped without a run_end of its own (refused, interrupted):
		// read to the end once more, then close. A run this server has
		// just resumed is not stopped, though its log may not say so yet.
		if more, err := s.cfg.Store.Records(ctx, st.runID, st.read); err == nil && len(more) == 0 {
			return true
		}
	}
	if time.Since(st.quietSince) >= s.heartbeat {
		fmt.Fprint(st.w, ": heartbeat\n\n")
		if !st.flush() {
			return true
		}
		st.quietSince = time.Now()
	}
	return false
}

// write writes one record of the log as the client should see it; true
// when it is the run's own run_end. A record that does not open (a
// sealed one, without the key) ends the stream with a comment saying
// why: open is then nil.
func (st *eventStream) write(rec *store.Record) bool {
	st.read = rec.Seq
	if err := st.open.Open(rec); err != nil {
		fmt.Fprintf(st.w, ": %s\n\n", strings.ReplaceAll(err.Error(), "\n", " "))
		st.open = nil
		return false
	}
	if rec.Seq <= st.last {
		return false
	}
	switch rec.Kind {
	case store.KindResume:
		writeResume(st.w, st.runID, rec)
		return false
	case store.KindEvent:
	default:
		return false
	}
	h := headOf(rec.Data)
	fmt.Fprintf(st.w, "id: %d\nevent: %s\ndata: %s\n\n", rec.Seq, h.Type, bytes.TrimSpace(withSeq(rec.Data, rec.Seq)))
	st.quietSince = time.Now()
	return h.Type == "run_end" && h.RunID == st.runID
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

// withSeq is an event's JSON with its seq the record's place in the log,
// its SSE id: the bus that emitted it numbered it otherwise, and again
// from 1 after a resume. encoding/json writes seq after four scalar
// fields, so its first "seq": is the event's own.
func withSeq(data []byte, seq int64) []byte {
	const key = `"seq":`
	i := bytes.Index(data, []byte(key))
	if i < 0 {
		return data
	}
	start := i + len(key)
	end := start
	for end < len(data) && data[end] >= '0' && data[end] <= '9' {
		end++
	}
	out := make([]byte, 0, len(data)+8)
	out = append(out, data[:start]...)
	out = strconv.AppendInt(out, seq, 10)
	return append(out, data[end:]...)
}
