package server

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/agentry/agentry/store"
)

// The protocol decoders, fuzzed: whatever body a caller sends to an
// endpoint, a request the server refuses (an HTTP error, or a JSON-RPC
// error) writes nothing to the store, and a key that may not write
// (a viewer's, or none) never does.

// fuzzServer is a server for the fuzz targets: greeter and approver (as
// in the ownership tests) behind ownerKeys.
type fuzzServer struct {
	srv  *Server
	http *httptest.Server
	st   store.Store
}

func newFuzzServer(tb testing.TB) *fuzzServer {
	tb.Helper()
	st, err := store.Open(context.Background(), filepath.Join(tb.TempDir(), "runs.db"))
	if err != nil {
		tb.Fatal(err)
	}
	reg, opts := politeAgents(tb)
	srv, err := New(Config{Store: st, Agents: reg, Keys: ownerKeys, AgentOptions: opts, A2AAgent: "greeter"})
	if err != nil {
		tb.Fatal(err)
	}
	fs := &fuzzServer{srv: srv, http: httptest.NewServer(srv), st: st}
	tb.Cleanup(func() {
		fs.http.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		srv.Close(ctx)
		reg.Close()
		st.Close()
	})
	return fs
}

// quiet waits until no run of the server goes on (a run a request
// started has written all it will).
func (fs *fuzzServer) quiet() error {
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(time.Millisecond) {
		if len(fs.srv.slots) == 0 {
			return nil
		}
	}
	return errors.New("runs still going after 10 s")
}

// written is how many runs, log records and audit records the store holds.
func (fs *fuzzServer) written() (string, error) {
	ctx := context.Background()
	runs, err := fs.st.List(ctx, store.Filter{Limit: 1000})
	if err != nil {
		return "", err
	}
	recs := 0
	for _, r := range runs {
		l, err := fs.st.Records(ctx, r.ID, 0)
		if err != nil {
			return "", err
		}
		recs += len(l)
	}
	audit, err := fs.st.AuditLog(ctx, "")
	return fmt.Sprintf("%d runs, %d log records, %d audit records", len(runs), recs, len(audit)), err
}

// fuzzKeys are the keys an input is sent with: one that may write (its
// own user's runner), a stranger's runner, and two that may not.
var fuzzKeys = []struct {
	key    string
	writes bool
}{{"alice-run", true}, {"bob-run", true}, {"alice-view", false}, {"", false}}

// fuzzEndpoint sends body to path with each kind of key and checks that
// a refused request, or one with a key that may not write, leaves the
// store as it was.
func fuzzEndpoint(t *testing.T, fs *fuzzServer, path string, which uint8, body []byte) {
	k := fuzzKeys[int(which)%len(fuzzKeys)]
	if err := fs.quiet(); err != nil {
		t.Fatal(err)
	}
	before, err := fs.written()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "POST", fs.http.URL+path, bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	if k.key != "" {
		req.Header.Set("Authorization", "Bearer "+k.key)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	data, _ := io.ReadAll(resp.Body) // a stream ends with its run, or at the deadline
	resp.Body.Close()
	cancel()
	if err := fs.quiet(); err != nil {
		t.Fatal(err)
	}
	after, err := fs.written()
	if err != nil {
		t.Fatal(err)
	}
	// Refused: answered with an error before a run began (an answer
	// about a run, as a chat completion's of a paused run, names it).
	refused := (resp.StatusCode >= 400 || rpcError(data) != 0) && resp.Header.Get("X-Agentry-Run-Id") == ""
	if after != before && (refused || !k.writes) {
		t.Errorf("%s with key %q (status %d, refused %v) wrote to the store: %s, then %s\nbody: %q\nanswer: %s",
			path, k.key, resp.StatusCode, refused, before, after, body, clip(data))
	}
}

// seeds are bodies of each protocol, well formed and not, and the
// attacks that once got through.
func seeds(f *testing.F, bodies ...string) {
	for _, b := range bodies {
		for k := range fuzzKeys {
			f.Add(uint8(k), []byte(b))
			f.Add(uint8(k), []byte(b+"x"))
		}
	}
	f.Add(uint8(0), []byte(""))
	f.Add(uint8(0), []byte("null"))
	f.Add(uint8(0), []byte(`{"jsonrpc": "2.0"`))
}

func FuzzA2A(f *testing.F) {
	seeds(f,
		a2aMessage(false, "", "hi", ""), a2aMessage(true, "", "hi", ""),
		a2aMessage(false, "task-1", "", `{"approved": true}`), a2aMessage(true, "task-1", "", `{"approved": true}`),
		`{"jsonrpc": "2.0", "id": 1, "method": "CancelTask", "params": {"id": "task-1"}}`,
		`{"jsonrpc": "2.0", "id": 1, "method": "tasks/cancel", "params": {"id": "task-1"}}`,
		`{"jsonrpc": "2.0", "id": 1, "method": "SendStreamingMessage", "params": {"message": {"messageId": "m", "role": "ROLE_USER", "parts": [{"text": "hi"}]}}}`,
		`{"jsonrpc": "2.0", "id": 1, "method": "message/stream", "params": {"message": {"kind": "message", "messageId": "m", "role": "user", "parts": [{"kind": "text", "text": "hi"}]}}}`,
		`{"jsonrpc": "2.0", "id": 1, "method": "GetTask", "params": {"id": "task-1"}}`,
		`{"jsonrpc": "2.0", "id": 1, "method": "", "params": {}}`,
		`{"jsonrpc": "2.0", "id": 1, "METHOD": "SendMessage", "params": {"message": {"messageId": "m", "role": "ROLE_USER", "parts": [{"text": "hi"}]}}}`,
		`{"jsonrpc": "2.0", "id": 1, "method": "GetTask", "method": "SendMessage", "params": {"message": {"messageId": "m", "role": "ROLE_USER", "parts": [{"text": "hi"}]}}}`,
		`[{"jsonrpc": "2.0", "id": 1, "method": "SendMessage"}]`)
	fs := newFuzzServer(f)
	f.Fuzz(func(t *testing.T, key uint8, body []byte) {
		path := "/a2a/greeter"
		if key&4 != 0 {
			path = "/a2a/approver"
		}
		fuzzEndpoint(t, fs, path, key, body)
	})
}

func FuzzAGUI(f *testing.F) {
	seeds(f,
		`{"threadId": "t1", "runId": "r1", "messages": [{"id": "m1", "role": "user", "content": "hi"}]}`,
		`{"threadId": "t1", "runId": "r2", "messages": [], "resume": [{"interruptId": "run_x:1:0", "status": "resolved", "payload": {"approved": true}}]}`,
		`{"threadId": "", "runId": "r1", "messages": []}`,
		`{"threadId": "t1", "runId": "r1", "messages": [{"role": "user", "content": [{"type": "text", "text": "hi"}]}], "state": {}, "tools": [], "context": []}`)
	fs := newFuzzServer(f)
	f.Fuzz(func(t *testing.T, key uint8, body []byte) {
		path := "/ag-ui/greeter"
		if key&4 != 0 {
			path = "/ag-ui/approver"
		}
		fuzzEndpoint(t, fs, path, key, body)
	})
}

func FuzzMCP(f *testing.F) {
	seeds(f,
		`{"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "greeter", "arguments": {"task": "hi"}}}`,
		`{"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "approver", "arguments": "nope"}}`,
		`{"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}}`,
		`{"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "c", "version": "1"}}}`,
		`[{"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "greeter"}}]`)
	fs := newFuzzServer(f)
	f.Fuzz(func(t *testing.T, key uint8, body []byte) {
		fuzzEndpoint(t, fs, "/mcp", key, body)
	})
}

func FuzzChatCompletions(f *testing.F) {
	seeds(f,
		`{"model": "greeter", "messages": [{"role": "user", "content": "hi"}]}`,
		`{"model": "greeter", "messages": [{"role": "user", "content": "hi"}], "stream": true, "stream_options": {"include_usage": true}}`,
		`{"model": "approver", "messages": [{"role": "user", "content": [{"type": "text", "text": "hi"}]}], "user": "bob"}`,
		`{"model": "nope", "messages": []}`,
		`{"model": "greeter", "messages": [{"role": "system", "content": 5}]}`)
	fs := newFuzzServer(f)
	f.Fuzz(func(t *testing.T, key uint8, body []byte) {
		fuzzEndpoint(t, fs, "/v1/chat/completions", key, body)
	})
}

// TestFuzzRefusalShape: the property the fuzz targets check holds for a
// refusal this test knows is one (so that a target that checks nothing
// would be caught): a viewer's message is refused, and writes nothing.
func TestFuzzRefusalShape(t *testing.T) {
	fs := newFuzzServer(t)
	before, _ := fs.written()
	fuzzEndpoint(t, fs, "/a2a/greeter", 2, []byte(a2aMessage(false, "", "hi", "")))
	fuzzEndpoint(t, fs, "/a2a/greeter", 0, []byte(a2aMessage(false, "", "hi", "")))
	after, _ := fs.written()
	if before == after || !strings.Contains(after, "1 runs") {
		t.Errorf("the runner's message wrote %s (from %s): want one run", after, before)
	}
	var m map[string]any
	if json.Unmarshal([]byte(a2aMessage(true, "t", "", `{"approved": true}`)), &m) != nil {
		t.Error("a seed is not JSON")
	}
}
