package openai

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
)

// canned is one response of the fake server.
type canned struct {
	status  int
	headers map[string]string
	body    string   // a JSON body
	sse     []string // or server-sent events, each a data payload
	cut     bool     // close the connection after the events, mid-stream
}

// recorded is one request the fake server received.
type recorded struct {
	method, path string
	header       http.Header
	body         []byte
}

// fake is a local server that replays the vendor's documented responses
// and records what the client sent.
type fake struct {
	*httptest.Server
	mu   sync.Mutex
	next []canned
	reqs []recorded
}

func newFake(t *testing.T, responses ...canned) *fake {
	f := &fake{next: responses}
	f.Server = httptest.NewServer(http.HandlerFunc(f.serve))
	t.Cleanup(f.Close)
	return f
}

func (f *fake) serve(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	f.mu.Lock()
	f.reqs = append(f.reqs, recorded{method: r.Method, path: r.URL.Path, header: r.Header.Clone(), body: body})
	if len(f.next) == 0 {
		f.mu.Unlock()
		http.Error(w, `{"error": {"message": "no canned response left", "type": "test"}}`, 500)
		return
	}
	c := f.next[0]
	f.next = f.next[1:]
	f.mu.Unlock()
	for k, v := range c.headers {
		w.Header().Set(k, v)
	}
	if c.sse != nil {
		w.Header().Set("Content-Type", "text/event-stream")
		w.WriteHeader(http.StatusOK)
		fl := w.(http.Flusher)
		for _, ev := range c.sse {
			fmt.Fprintf(w, "data: %s\n\n", ev)
			fl.Flush()
		}
		if c.cut {
			hj, ok := w.(http.Hijacker)
			if ok {
				conn, _, err := hj.Hijack()
				if err == nil {
					conn.Close()
				}
			}
		}
		return
	}
	w.Header().Set("Content-Type", "application/json")
	if c.status == 0 {
		c.status = http.StatusOK
	}
	w.WriteHeader(c.status)
	io.WriteString(w, c.body)
}

func (f *fake) requests() []recorded {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]recorded(nil), f.reqs...)
}

// jsonEqual compares two JSON documents, ignoring formatting and key order.
func jsonEqual(t *testing.T, got []byte, want string) {
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
