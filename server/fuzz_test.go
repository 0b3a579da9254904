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
	// alice's things, which an input names by placeholder: her task
	// waiting for input (TASK_W), her completed task (TASK_D), and the
	// call her paused run waits on (CALL_P, an AG-UI interrupt's id).
	names *strings.Replacer
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
	waiting, err := fs.task("/a2a/approver")
	if err != nil {
		tb.Fatal(err)
	}
	done, err := fs.task("/a2a/greeter")
	if err != nil {
		tb.Fatal(err)
	}
	call, err := fs.pausedCall()
	if err != nil {
		tb.Fatal(err)
	}
	fs.names = strings.NewReplacer("TASK_W", waiting, "TASK_D", done, "CALL_P", call)
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

// send posts body to path with key; it returns the answer whole (a
// stream ends with its run, or after 5 s).
func (fs *fuzzServer) send(path, key string, body []byte) (*http.Response, []byte, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "POST", fs.http.URL+path, bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, nil, err
	}
	data, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	return resp, data, nil
}

// task starts a task of alice's at endpoint and returns its id.
func (fs *fuzzServer) task(endpoint string) (string, error) {
	_, data, err := fs.send(endpoint, "alice-run", []byte(a2aMessage(false, "", "hi", "")))
	if err != nil {
		return "", err
	}
	var res struct {
		Result struct {
			Task struct {
				ID string `json:"id"`
			} `json:"task"`
		} `json:"result"`
	}
	if err := json.Unmarshal(data, &res); err != nil || res.Result.Task.ID == "" {
		return "", fmt.Errorf("alice's task at %s: %v %s", endpoint, err, data)
	}
	return res.Result.Task.ID, fs.quiet()
}

// pausedCall starts a run of alice's that pauses for approval and
// returns the idempotency key of the call it waits on.
func (fs *fuzzServer) pausedCall() (string, error) {
	if _, _, err := fs.send("/v1/runs?wait=true", "alice-run", []byte(`{"agent": "approver"}`)); err != nil {
		return "", err
	}
	runs, err := fs.st.List(context.Background(), store.Filter{Status: store.AwaitingApproval, Kind: "agent"})
	if err != nil || len(runs) == 0 {
		return "", fmt.Errorf("no paused run: %v", err)
	}
	recs, err := fs.st.Records(context.Background(), runs[0].ID, 0)
	for _, r := range recs {
		if r.Kind == store.KindApproval {
			return r.Key, err
		}
	}
	return "", fmt.Errorf("run %s waits on no call: %v", runs[0].ID, err)
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
// store as it was. Its placeholders name alice's things (fuzzServer).
func fuzzEndpoint(t *testing.T, fs *fuzzServer, path string, which uint8, body []byte) {
	k := fuzzKeys[int(which)%len(fuzzKeys)]
	if err := fs.quiet(); err != nil {
		t.Fatal(err)
	}
	before, err := fs.written()
	if err != nil {
		t.Fatal(err)
	}
	resp, data, err := fs.send(path, k.key, []byte(fs.names.Replace(string(body))))
	if err != nil {
		t.Fatal(err)
	}
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
		for k := range 2 * len(fuzzKeys) { // each key, at each of the two agents
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
		a2aMessage(false, "TASK_W", "", `{"approved": true}`), a2aMessage(true, "TASK_W", "", `{"approved": true}`),
		a2aMessage(false, "TASK_W", "", `{"approve": ["CALL_P"]}`), a2aMessage(false, "TASK_D", "hi", ""),
		`{"jsonrpc": "2.0", "id": 1, "method": "CancelTask", "params": {"id": "TASK_W"}}`,
		`{"jsonrpc": "2.0", "id": 1, "method": "tasks/cancel", "params": {"id": "TASK_W"}}`,
		`{"jsonrpc": "2.0", "id": 1, "method": "SubscribeToTask", "params": {"id": "TASK_W"}}`,
		`{"jsonrpc": "2.0", "id": 1, "method": "SendStreamingMessage", "params": {"message": {"messageId": "m", "role": "ROLE_USER", "parts": [{"text": "hi"}]}}}`,
		`{"jsonrpc": "2.0", "id": 1, "method": "message/stream", "params": {"message": {"kind": "message", "messageId": "m", "role": "user", "parts": [{"kind": "text", "text": "hi"}]}}}`,
		`{"jsonrpc": "2.0", "id": 1, "method": "GetTask", "params": {"id": "TASK_D"}}`,
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
		`{"threadId": "t1", "runId": "r2", "messages": [], "resume": [{"interruptId": "CALL_P", "status": "resolved", "payload": {"approved": true}}]}`,
		`{"threadId": "", "runId": "r2", "messages": [], "resume": [{"interruptId": "CALL_P", "status": "cancelled"}]}`,
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
	if !strings.HasPrefix(before, "3 runs") || !strings.HasPrefix(after, "4 runs") {
		t.Errorf("the runner's message wrote %s (from %s): want one run more", after, before)
	}
	var m map[string]any
	if json.Unmarshal([]byte(a2aMessage(true, "t", "", `{"approved": true}`)), &m) != nil {
		t.Error("a seed is not JSON")
	}
}
