package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/agentry/agentry/agent"
	"github.com/agentry/agentry/store"
)

// Each attack that found a hole in the server, tried again as the
// hostile caller tried it: every test here failed before its fix.

// counts is how many runs and audit records the store holds.
func counts(t *testing.T, st store.Store) (runs, audit int) {
	t.Helper()
	ctx := context.Background()
	rs, err := st.List(ctx, store.Filter{Limit: 1000})
	if err != nil {
		t.Fatal(err)
	}
	recs, err := st.AuditLog(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	return len(rs), len(recs)
}

var msgID int

// a2aMessage is a JSON-RPC request of A2A 1.0 or 0.3: a message (text or a
// data part) to a new task, or to the task named.
func a2aMessage(legacy bool, task, text string, data string) string {
	part := fmt.Sprintf(`{"text": %q}`, text)
	if data != "" {
		part = fmt.Sprintf(`{"data": %s}`, data)
	}
	method, msg := "SendMessage", `{"messageId": "%s", "role": "ROLE_USER", "parts": [%s]%s}`
	if legacy {
		method, msg = "message/send", `{"kind": "message", "messageId": "%s", "role": "user", "parts": [%s]%s}`
		part = strings.Replace(part, "{", `{"kind": "text", `, 1)
		if data != "" {
			part = fmt.Sprintf(`{"kind": "data", "data": %s}`, data)
		}
	}
	ref := ""
	if task != "" {
		ref = fmt.Sprintf(`, "taskId": %q`, task)
	}
	msgID++
	return fmt.Sprintf(`{"jsonrpc": "2.0", "id": 7, "method": %q, "params": {"message": `+msg+`}}`, method, fmt.Sprint("m-", msgID), part, ref)
}

// TestA2ATrailingByte: a viewer's key once acted through A2A with one
// byte after the JSON (the role was decided on a parse that failed, the
// SDK executed another that ignored the byte): it started runs, approved
// a paused call, cancelled another user's task. Now a body with anything
// after its request is refused before the SDK reads it, and without the
// byte the viewer is refused by the role: nothing is written either way.
// Both protocol versions.
func TestA2ATrailingByte(t *testing.T) {
	o := newOwnersFixture(t, Config{})
	waiting := o.a2aTask(t, "/a2a/approver", `"TASK_STATE_INPUT_REQUIRED"`)
	running := o.a2aTask(t, "/a2a/waiter", `"TASK_STATE_`)
	waitFor(t, func() bool { _, err := o.st.Get(context.Background(), o.runOfTask(t, running)); return err == nil })
	for _, legacy := range []bool{false, true} {
		cancel := fmt.Sprintf(`{"jsonrpc": "2.0", "id": 8, "method": "CancelTask", "params": {"id": %q}}`, running)
		if legacy {
			cancel = strings.Replace(cancel, `"CancelTask"`, `"tasks/cancel"`, 1)
		}
		for _, tc := range []struct {
			name, path, body string
		}{
			{"start a run", "/a2a/greeter", a2aMessage(legacy, "", "hi", "")},
			{"approve a paused call", "/a2a/approver", a2aMessage(legacy, waiting, "", `{"approved": true}`)},
			{"cancel a task", "/a2a/waiter", cancel},
		} {
			for _, tail := range []string{"x", " 1", "\n{}", ""} {
				name := fmt.Sprintf("0.3=%v %s tail %q", legacy, tc.name, tail)
				runs, audit := counts(t, o.st)
				code, _, body := o.raw(t, "POST", tc.path, "alice-view", tc.body+tail)
				want, rpc := 400, -32700
				if tail == "" {
					want, rpc = 403, -31403
				}
				if code != want || rpcError(body) != rpc {
					t.Errorf("%s: %d %s, want %d with JSON-RPC %d", name, code, clip(body), want, rpc)
				}
				if r, a := counts(t, o.st); r != runs || a != audit {
					t.Errorf("%s: the store went from %d runs and %d audit records to %d and %d", name, runs, audit, r, a)
				}
			}
		}
	}
	// The paused run still waits; the running one still runs.
	run, _ := o.st.Get(context.Background(), o.runOfTask(t, waiting))
	if run.Status != store.AwaitingApproval {
		t.Errorf("the paused run is %s", run.Status)
	}
	run, _ = o.st.Get(context.Background(), o.runOfTask(t, running))
	if run.Status != store.Running {
		t.Errorf("the running run is %s", run.Status)
	}
}

// runOfTask is the run of one of alice's tasks.
func (o *ownersFixture) runOfTask(t *testing.T, task string) string {
	t.Helper()
	_, _, body := o.raw(t, "POST", "/a2a/greeter", "alice-view", fmt.Sprintf(`{"jsonrpc": "2.0", "id": 1, "method": "GetTask", "params": {"id": %q}}`, task))
	var res struct {
		Result struct {
			Metadata struct {
				Agentry struct {
					RunID string `json:"runId"`
				} `json:"agentry"`
			} `json:"metadata"`
		} `json:"result"`
	}
	if err := json.Unmarshal(body, &res); err != nil || res.Result.Metadata.Agentry.RunID == "" {
		t.Fatalf("task %s: %v %s", task, err, body)
	}
	return res.Result.Metadata.Agentry.RunID
}

// TestA2AStreamLimit: a stream opened with a trailing byte once went
// past --max-streams (the limit was decided on the failed parse). Now
// every stream method takes its stream slot on the request the SDK
// executes: past the limit it is refused with 429, whatever the body.
func TestA2AStreamLimit(t *testing.T) {
	o := newOwnersFixture(t, Config{MaxStreams: 1})
	running := o.a2aTask(t, "/a2a/waiter", `"TASK_STATE_`)
	sub := fmt.Sprintf(`{"jsonrpc": "2.0", "id": 1, "method": "SubscribeToTask", "params": {"id": %q}}`, running)
	// The one stream: alice watches her running task.
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "POST", o.http.URL+"/a2a/waiter", strings.NewReader(sub))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer alice-view")
	resp, err := http.DefaultClient.Do(req)
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("the first stream: %v %v", err, resp)
	}
	defer resp.Body.Close()
	for _, tc := range []struct{ name, key, body string }{
		{"a subscription", "alice-view", sub},
		{"a subscription with a trailing byte", "alice-view", sub + "x"},
		{"a streamed message", "alice-run", strings.Replace(a2aMessage(false, "", "hi", ""), `"SendMessage"`, `"SendStreamingMessage"`, 1)},
		{"a streamed message, 0.3", "alice-run", strings.Replace(a2aMessage(true, "", "hi", ""), `"message/send"`, `"message/stream"`, 1)},
	} {
		code, h, body := o.raw(t, "POST", "/a2a/waiter", tc.key, tc.body)
		if tc.body == sub+"x" {
			if code != 400 {
				t.Errorf("%s: %d %s", tc.name, code, clip(body))
			}
			continue
		}
		if code != 429 || h.Get("Retry-After") == "" || !strings.Contains(string(body), "too_many_streams") {
			t.Errorf("%s past the limit: %d %v %s", tc.name, code, h, clip(body))
		}
	}
}

// TestModelFromRequest: a request's "model" once named any file as a
// scripted model ("scripted:PATH"): read with no cap, its errors telling
// whether the file exists and what it holds, a FIFO holding the request.
// Now a request names only the agent's own models or the operator's
// (--models), and every other value gets the same answer, at once.
func TestModelFromRequest(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, "fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	secret := filepath.Join(dir, "secret.json")
	writeFile(t, secret, `{"password": "hunter2"}`)
	o := newOwnersFixture(t, Config{Models: []string{"scripted:allowed"}})
	var first string
	for _, model := range []string{"scripted:" + fifo, "scripted:" + secret, "scripted:" + filepath.Join(dir, "missing.json"),
		"scripted:/etc/passwd", "scripted:" + dir, "gpt-4.1", "openai:gpt-4.1", "ollama:qwen3", "", " "} {
		if model == "" {
			continue // no model: the agent's own
		}
		code, _, body := o.raw(t, "POST", "/v1/runs", "alice-run", fmt.Sprintf(`{"agent": "greeter", "model": %q}`, model))
		if code != 400 {
			t.Errorf("model %q: %d %s", model, code, clip(body))
		}
		if first == "" {
			first = string(body)
		} else if string(body) != first {
			t.Errorf("model %q answers\n%s\nnot as the others\n%s", model, body, first)
		}
		if strings.Contains(string(body), "hunter2") || strings.Contains(string(body), "password") || strings.Contains(string(body), dir) {
			t.Errorf("model %q: the answer tells of the file: %s", model, body)
		}
	}
	// An admin's inline spec names models the operator lists, with no
	// base_url, or none (the operator's default).
	for _, sp := range []string{
		`{"agent_name": "x", "version": "v1", "model_name": "scripted:` + secret + `"}`,
		`{"agent_name": "x", "version": "v1", "model_name": "gpt-4.1", "base_url": "http://169.254.169.254/"}`,
		`{"agent_name": "x", "version": "v1", "fallback_models": [{"model_name": "scripted:` + fifo + `"}]}`,
		`{"agent_name": "x", "version": "v1", "model_name": "scripted:allowed", "provider": "openai"}`,
	} {
		code, _, body := o.raw(t, "POST", "/v1/runs", "root-key", `{"spec": `+sp+`}`)
		if code != 400 || strings.Contains(string(body), "hunter2") {
			t.Errorf("inline spec %s: %d %s", sp, code, clip(body))
		}
	}
	if code, _, body := o.raw(t, "POST", "/v1/runs?wait=true", "root-key", `{"spec": {"agent_name": "x", "version": "v1", "system_text": "Hi."}}`); code != 200 {
		t.Errorf("an inline spec with no model: %d %s", code, clip(body))
	}
	// What the operator allows runs.
	if code, _, body := o.raw(t, "POST", "/v1/runs?wait=true", "alice-run", `{"agent": "greeter", "model": "scripted:allowed"}`); code != 200 ||
		!strings.Contains(string(body), `"model":"allowed"`) {
		t.Errorf("an operator's model: %d %s", code, clip(body))
	}
	if _, err := os.Stat(fifo); err != nil {
		t.Fatal(err)
	}
}

// TestBearerScheme: the scheme's name is case-insensitive (RFC 9110);
// a request with two Authorization headers is refused, whichever comes
// first, not served as the first.
func TestBearerScheme(t *testing.T) {
	o := newOwnersFixture(t, Config{})
	for _, tc := range []struct {
		name   string
		header []string
		want   int
	}{
		{"lower case", []string{"Authorization", "bearer alice-view"}, 200},
		{"upper case", []string{"Authorization", "BEARER alice-view"}, 200},
		{"extra spaces", []string{"Authorization", "Bearer   alice-view  "}, 200},
		{"another scheme", []string{"Authorization", "Basic alice-view"}, 401},
		{"no key", []string{"Authorization", "Bearer "}, 401},
		{"a known key first", []string{"Authorization", "Bearer root-key", "Authorization", "Bearer nope"}, 400},
		{"a known key second", []string{"Authorization", "Bearer nope", "Authorization", "Bearer root-key"}, 400},
		{"the same key twice", []string{"Authorization", "Bearer root-key", "Authorization", "Bearer root-key"}, 400},
	} {
		code, _, body := o.raw(t, "GET", "/v1/whoami", "", "", tc.header...)
		if code != tc.want {
			t.Errorf("%s: %d %s, want %d", tc.name, code, clip(body), tc.want)
		}
	}
}

// TestAGUIInterruptOfAnotherUser: an AG-UI resume naming an interrupt of
// another user's run answers as one naming no run; one of a user the
// caller reaches but may not decide for is refused; nothing is decided.
func TestAGUIInterruptOfAnotherUser(t *testing.T) {
	o := newOwnersFixture(t, Config{})
	var waiting map[string]any
	code, res := o.do(t, "GET", "/v1/runs/"+o.paused, "alice-view", "")
	if code != 200 {
		t.Fatalf("%d %v", code, res)
	}
	recs, _ := o.st.Records(context.Background(), o.paused, 0)
	key := ""
	for _, r := range recs {
		if r.Kind == store.KindApproval {
			key = r.Key
		}
	}
	if key == "" {
		t.Fatal("no call waits")
	}
	_ = waiting
	body := func(id string) string {
		return fmt.Sprintf(`{"threadId": "t", "runId": "r2", "messages": [], "resume": [{"interruptId": %q, "status": "resolved", "payload": {"approved": true}}]}`, id)
	}
	missing := "run_0000000000000000" + key[strings.Index(key, ":"):]
	for _, k := range []string{"bob-run"} {
		code, _, got := o.raw(t, "POST", "/ag-ui/approver", k, body(key))
		_, _, other := o.raw(t, "POST", "/ag-ui/approver", k, body(missing))
		if code != 404 || strings.ReplaceAll(string(got), key, "K") != strings.ReplaceAll(string(other), missing, "K") {
			t.Errorf("%s: %d %s, not as a missing run's %s", k, code, got, other)
		}
	}
	if code, _, got := o.raw(t, "POST", "/ag-ui/approver", "dave-allrun", body(key)); code != 403 {
		t.Errorf("a runner that reaches every user's answers alice's interrupt: %d %s", code, clip(got))
	}
	if run, _ := o.st.Get(context.Background(), o.paused); run.Status != store.AwaitingApproval {
		t.Errorf("the run is %s", run.Status)
	}
}

// localRemote is a Remote that runs each run in this process, on the
// server's store, with the agent it names from agents: what a worker
// does, without the engine between.
type localRemote struct {
	agents *agent.Registry
	st     store.Store
	wg     sync.WaitGroup
	mu     sync.Mutex
	done   map[string]chan struct{} // closed when the run's "workflow" ends
	gate   chan struct{}            // what a run given "gated" waits for before it begins
}

func (r *localRemote) Start(_ context.Context, rr RemoteRun) (string, error) {
	if rr.Input["doomed"] != nil {
		// The engine takes the run and its workflow fails before the
		// run begins: nothing is ever stored.
		id := fmt.Sprintf("run_doomed%d", len(r.done))
		done := make(chan struct{})
		close(done)
		r.mu.Lock()
		r.done[id] = done
		r.mu.Unlock()
		return id, nil
	}
	a, err := r.agents.Get(rr.Agent)
	if err != nil {
		return "", err
	}
	sess, err := a.NewSession(rr.Input, agent.WithStore(r.st), agent.WithUser(rr.UserID))
	if err != nil {
		return "", err
	}
	done := make(chan struct{})
	r.mu.Lock()
	r.done[sess.RunID()] = done
	r.mu.Unlock()
	r.wg.Add(1)
	go func() {
		defer r.wg.Done()
		defer close(done)
		if rr.Input["gated"] != nil {
			<-r.gate // no worker takes it until the test says so
		}
		sess.Run(context.Background())
	}()
	return sess.RunID(), nil
}

func (r *localRemote) Wait(ctx context.Context, id string) error {
	r.mu.Lock()
	done := r.done[id]
	r.mu.Unlock()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (r *localRemote) Starting(_ context.Context, id string) bool {
	r.mu.Lock()
	done, ok := r.done[id]
	r.mu.Unlock()
	select {
	case <-done:
		return false
	default:
		return ok
	}
}

func (r *localRemote) Decide(context.Context, string, []string, []string, string, string) error {
	return errors.New("not in this test")
}
func (r *localRemote) Abort(context.Context, string) error { return errors.New("not in this test") }
func (r *localRemote) Drives(string) bool                  { return false }

// TestMaxRunsRemote: --max-runs once did not bound serve --temporal (the
// run started on the engine before a slot was taken). Now a run started
// on the Remote holds its slot until it ends: past the limit, 429 before
// the Remote is asked; once a run ends, there is room again.
func TestMaxRunsRemote(t *testing.T) {
	remote := &localRemote{done: map[string]chan struct{}{}}
	t.Cleanup(remote.wg.Wait) // after the fixture's cleanup, which lets the held runs go
	f := newFixture(t, Config{MaxRuns: 2, Remote: remote})
	remote.agents, remote.st = f.srv.cfg.Agents, f.st
	for i := range 2 {
		if code, body := f.do(t, "POST", "/v1/runs", "", `{"agent": "waiter"}`); code != 201 {
			t.Fatalf("run %d: %d %v", i, code, body)
		}
	}
	code, _, body := f.raw(t, "POST", "/v1/runs", "", `{"agent": "waiter"}`)
	if code != 429 || !strings.Contains(string(body), "too_many_runs") {
		t.Fatalf("a third run: %d %s", code, body)
	}
	if rs, _ := f.st.List(context.Background(), store.Filter{}); len(rs) != 2 {
		t.Errorf("the Remote started %d runs, want 2", len(rs))
	}
	close(f.release) // the runs end
	waitFor(t, func() bool {
		code, _ := f.do(t, "POST", "/v1/runs?wait=true", "", `{"agent": "greeter"}`)
		return code == 201 || code == 200
	})
	// A run whose workflow ends before it begins (the engine refused it)
	// gives its slot back too: two of them, then room for a third run.
	for i := range 3 {
		waitFor(t, func() bool {
			code, _, _ := f.raw(t, "POST", "/v1/runs", "", `{"agent": "greeter", "input": {"doomed": true}}`)
			return code == 201
		})
		_ = i
	}
}

// TestCloseEndsOthersStreams: at SIGTERM the server once waited, up to
// --shutdown-timeout, for the event streams of runs another process
// drives. Now their streams end at once (their clients resume elsewhere
// with Last-Event-ID), while the run goes on where it is driven.
func TestCloseEndsOthersStreams(t *testing.T) {
	f := newFixture(t, Config{}) // drives the run
	id, _ := f.waiting(t)
	other, err := New(Config{Store: f.st, Agents: f.srv.cfg.Agents})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	hs := &http.Server{Handler: other}
	go hs.Serve(ln)
	resp, err := http.Get("http://" + ln.Addr().String() + "/v1/runs/" + id + "/events")
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("the stream: %v %v", err, resp)
	}
	defer resp.Body.Close()
	ended := make(chan error, 1)
	go func() {
		_, err := io.ReadAll(resp.Body)
		ended <- err
	}()
	// Stop as agentry serve does: the listener and the server at once,
	// with all the time in the world.
	stopped := make(chan error, 2)
	go func() { stopped <- hs.Shutdown(context.Background()) }()
	go func() { stopped <- other.Close(context.Background()) }()
	for range 2 {
		select {
		case err := <-stopped:
			if err != nil {
				t.Errorf("stop: %v", err)
			}
		case <-time.After(time.Minute):
			t.Fatal("the server waits for the stream of a run it does not drive")
		}
	}
	if err := <-ended; err != nil {
		t.Errorf("the stream did not end cleanly: %v", err)
	}
	if run, _ := f.st.Get(context.Background(), id); run.Status != store.Running {
		t.Errorf("the run, driven elsewhere, is %s", run.Status)
	}
}

// TestCloseEndsRemoteWaits: a request that waits for a run the Remote
// drives (?wait=true) once held SIGTERM for --shutdown-timeout too. Now
// it is answered 503 at once, naming the run, which goes on elsewhere.
func TestCloseEndsRemoteWaits(t *testing.T) {
	remote := &localRemote{done: map[string]chan struct{}{}}
	t.Cleanup(remote.wg.Wait) // after the fixture's cleanup, which lets the held run go
	f := newFixture(t, Config{Remote: remote})
	remote.agents, remote.st = f.srv.cfg.Agents, f.st
	answered := make(chan int, 1)
	go func() {
		code, _, _ := f.raw(t, "POST", "/v1/runs?wait=true", "", `{"agent": "waiter"}`)
		answered <- code
	}()
	waitFor(t, func() bool { rs, _ := f.st.List(context.Background(), store.Filter{}); return len(rs) == 1 })
	closed := make(chan error, 1)
	go func() { closed <- f.srv.Close(context.Background()) }()
	for _, c := range []any{answered, closed} {
		select {
		case <-time.After(time.Minute):
			t.Fatal("Close waits for a request that waits for a run the Remote drives")
		case v := <-answered:
			if v != 503 {
				t.Errorf("the waiting request: %d, want 503", v)
			}
		case err := <-closed:
			if err != nil {
				t.Errorf("close: %v", err)
			}
		}
		_ = c
	}
}

// TestRemoteRunWatchedFromItsID: a run the Remote has not begun when its
// id is answered (no worker took it within the wait) is still the
// caller's to watch: its event stream waits for it to begin, then streams
// it to its end, rather than answering that there is no such run.
func TestRemoteRunWatchedFromItsID(t *testing.T) {
	defer func(d time.Duration) { remoteBegin = d }(remoteBegin)
	remoteBegin = 20 * time.Millisecond
	remote := &localRemote{done: map[string]chan struct{}{}, gate: make(chan struct{})}
	t.Cleanup(remote.wg.Wait)
	f := newFixture(t, Config{Remote: remote})
	remote.agents, remote.st = f.srv.cfg.Agents, f.st
	code, body := f.do(t, "POST", "/v1/runs", "", `{"agent": "greeter", "input": {"task": "greet Ada", "gated": true}}`)
	id, _ := body["run_id"].(string)
	if code != 201 || id == "" {
		close(remote.gate)
		t.Fatalf("%d %v", code, body)
	}
	if _, err := f.st.Get(context.Background(), id); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("the run is stored before a worker took it: %v", err)
	}
	// Another server over the store and the Remote: a load balancer's
	// next pick, or this one restarted. It watches the run too.
	other, err := New(Config{Store: f.st, Agents: f.srv.cfg.Agents, Remote: remote, AgentOptions: f.srv.cfg.AgentOptions})
	if err != nil {
		close(remote.gate)
		t.Fatal(err)
	}
	f2 := &fixture{st: f.st, srv: other, http: httptest.NewServer(other), release: f.release}
	t.Cleanup(func() { f2.http.Close(); other.Close(context.Background()) })
	time.AfterFunc(100*time.Millisecond, func() { close(remote.gate) }) // a worker takes it while the clients wait
	// f2 first: it waits for the gate.
	for _, s := range []*fixture{f2, f} {
		events := s.stream(t, id, 0)
		if len(events) < 3 || events[0].typ != "run_start" || events[len(events)-1].typ != "run_end" {
			t.Errorf("the stream of a run begun after its id was answered: %v", events)
		}
	}
	if code, _ := f2.do(t, "GET", "/v1/runs/run_never_started", "", ""); code != 404 {
		t.Errorf("a run nobody started: %d", code)
	}
}
