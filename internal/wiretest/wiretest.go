// Package wiretest is a local HTTP server for provider wire-format tests:
// it replays a vendor's documented responses (JSON bodies, server-sent
// events, error bodies with rate-limit headers) and records the requests
// the client sent, so tests can assert the exact JSON on the wire.
package wiretest

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
)

// Reply is one response of the server.
type Reply struct {
	Status  int
	Headers map[string]string
	// Body is a JSON body; or SSE lists server-sent events, each written as
	// "event: NAME" (when Event is set) and "data: PAYLOAD".
	Body string
	SSE  []Event
	// Cut closes the connection after the events, mid-stream.
	Cut bool
}

// Event is one server-sent event.
type Event struct {
	Name string
	Data string
}

// Data returns events with data only.
func Data(payloads ...string) []Event {
	out := make([]Event, len(payloads))
	for i, p := range payloads {
		out[i] = Event{Data: p}
	}
	return out
}

// Request is one request the server received.
type Request struct {
	Method, Path, Query string
	Header              http.Header
	Body                []byte
}

// Server is the fake vendor.
type Server struct {
	*httptest.Server
	mu      sync.Mutex
	replies []Reply
	reqs    []Request
}

// New starts a server that answers with replies in order; it is closed
// when the test ends.
func New(t testing.TB, replies ...Reply) *Server {
	s := &Server{replies: replies}
	s.Server = httptest.NewServer(http.HandlerFunc(s.serve))
	t.Cleanup(s.Close)
	return s
}

func (s *Server) serve(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	s.mu.Lock()
	s.reqs = append(s.reqs, Request{Method: r.Method, Path: r.URL.Path, Query: r.URL.RawQuery, Header: r.Header.Clone(), Body: body})
	if len(s.replies) == 0 {
		s.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusInternalServerError)
		io.WriteString(w, `{"error": {"message": "wiretest: no reply left", "type": "test"}}`)
		return
	}
	c := s.replies[0]
	s.replies = s.replies[1:]
	s.mu.Unlock()
	for k, v := range c.Headers {
		w.Header().Set(k, v)
	}
	if c.SSE != nil {
		w.Header().Set("Content-Type", "text/event-stream")
		w.WriteHeader(http.StatusOK)
		fl := w.(http.Flusher)
		for _, ev := range c.SSE {
			if ev.Name != "" {
				fmt.Fprintf(w, "event: %s\n", ev.Name)
			}
			fmt.Fprintf(w, "data: %s\n\n", ev.Data)
			fl.Flush()
		}
		if c.Cut {
			if hj, ok := w.(http.Hijacker); ok {
				if conn, _, err := hj.Hijack(); err == nil {
					conn.Close()
				}
			}
		}
		return
	}
	if w.Header().Get("Content-Type") == "" {
		w.Header().Set("Content-Type", "application/json")
	}
	if c.Status == 0 {
		c.Status = http.StatusOK
	}
	w.WriteHeader(c.Status)
	io.WriteString(w, c.Body)
}

// Requests returns the requests received so far.
func (s *Server) Requests() []Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Request(nil), s.reqs...)
}

// JSONEqual fails the test unless got and want are the same JSON,
// whatever their formatting and key order.
func JSONEqual(t testing.TB, got []byte, want string) {
	t.Helper()
	var g, w any
	if err := json.Unmarshal(got, &g); err != nil {
		t.Fatalf("sent body is not JSON: %v\n%s", err, got)
	}
	if err := json.Unmarshal([]byte(want), &w); err != nil {
		t.Fatalf("bad expectation: %v", err)
	}
	gb, _ := json.MarshalIndent(g, "", "  ")
	wb, _ := json.MarshalIndent(w, "", "  ")
	if string(gb) != string(wb) {
		t.Errorf("sent:\n%s\nwant:\n%s", gb, wb)
	}
}
