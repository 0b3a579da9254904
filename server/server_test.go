package server

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/agentry/agentry/agent"
	"github.com/agentry/agentry/internal/syncbuf"
	"github.com/agentry/agentry/llm"
	"github.com/agentry/agentry/llm/scripted"
	"github.com/agentry/agentry/policy"
	"github.com/agentry/agentry/runlog"
	"github.com/agentry/agentry/spec"
	"github.com/agentry/agentry/store"
	_ "github.com/agentry/agentry/store/sqlite"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// held is a model that answers once release is closed (or its call's
// context ends): a run that stays running while a test looks at it.
type held struct{ release chan struct{} }

func (h held) Generate(ctx context.Context, _ *llm.Request) (*llm.Response, error) {
	select {
	case <-h.release:
		return &llm.Response{Content: "released"}, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// fixture is a server over a fresh SQLite store with two agents: greeter
// (scripted, two turns of a tool call then an answer) and waiter (held).
type fixture struct {
	srv     *Server
	http    *httptest.Server
	st      store.Store
	release chan struct{}
}

func newFixture(t *testing.T, c Config) *fixture {
	t.Helper()
	ctx := context.Background()
	st, err := store.Open(ctx, filepath.Join(t.TempDir(), "runs.db"))
	if err != nil {
		t.Fatal(err)
	}
	script, err := scripted.New("greeter",
		scripted.Turn{Content: "Looking.", ToolCalls: []scripted.ToolCall{{Name: "kv_set", Arguments: map[string]any{"key": "k", "value": "v"}}}},
		scripted.Turn{Content: "Hello, Ada."})
	if err != nil {
		t.Fatal(err)
	}
	tools := agent.WithTools(kvRegistry(t))
	greeter, err := agent.New(&spec.Spec{AgentName: "greeter", Version: "v1", SystemText: "Greet.", Tools: []string{"kv_set"}},
		agent.WithProvider(script.Model(), "scripted"), tools)
	if err != nil {
		t.Fatal(err)
	}
	f := &fixture{st: st, release: make(chan struct{})}
	waiter, err := agent.New(&spec.Spec{AgentName: "waiter", Version: "v1", SystemText: "Wait."}, agent.WithProvider(held{f.release}, "test"))
	if err != nil {
		t.Fatal(err)
	}
	reg := agent.NewRegistry()
	if err := reg.Register(greeter, waiter); err != nil {
		t.Fatal(err)
	}
	c.Store, c.Agents = st, reg
	// The caller's options come after the fixture's: theirs win.
	c.AgentOptions = append([]agent.Option{agent.WithProvider(script.Model(), "scripted"), tools}, c.AgentOptions...)
	f.srv, err = New(c)
	if err != nil {
		t.Fatal(err)
	}
	f.http = httptest.NewServer(f.srv)
	f.cleanup(t, reg, greeter, waiter, st)
	return f
}

// cleanup stops the fixture when the test ends: its held models let go,
// its server closed, then what it was built on.
func (f *fixture) cleanup(t *testing.T, closers ...io.Closer) {
	t.Cleanup(func() {
		select {
		case <-f.release:
		default:
			close(f.release)
		}
		f.http.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := f.srv.Close(ctx); err != nil {
			t.Errorf("close: %v", err)
		}
		for _, c := range closers {
			c.Close()
		}
	})
}

// do sends a request with key (none when ""), and returns the status and
// the body decoded from JSON.
func (f *fixture) do(t *testing.T, method, path, key, body string) (int, map[string]any) {
	t.Helper()
	req, _ := http.NewRequest(method, f.http.URL+path, strings.NewReader(body))
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var out map[string]any
	data, _ := io.ReadAll(resp.Body)
	if err := json.Unmarshal(data, &out); err != nil {
		t.Fatalf("%s %s: not JSON (%d): %s", method, path, resp.StatusCode, data)
	}
	checkResponse(t, method, path, resp.StatusCode, data)
	return resp.StatusCode, out
}

// waiting starts a run of the waiter (held until f.release closes) and
// opens its event stream, closed when the test ends.
func (f *fixture) waiting(t *testing.T) (id string, stream io.ReadCloser) {
	t.Helper()
	code, created := f.do(t, "POST", "/v1/runs", "", `{"agent": "waiter", "input": {"task": "wait"}}`)
	if code != 201 || created["status"] != "running" {
		t.Fatalf("%d %v", code, created)
	}
	id = created["run_id"].(string)
	resp, err := http.Get(f.http.URL + "/v1/runs/" + id + "/events")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	return id, resp.Body
}

// post sends body as JSON to url with the given headers and returns the
// status and the body decoded from JSON.
func post(t *testing.T, url, body string, header map[string]string) (int, map[string]any) {
	t.Helper()
	req, _ := http.NewRequest("POST", url, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	for k, v := range header {
		req.Header.Set(k, v)
	}
	if h := header["Host"]; h != "" {
		req.Host = h
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var out map[string]any
	json.NewDecoder(resp.Body).Decode(&out)
	return resp.StatusCode, out
}

// sse is one server-sent event.
type sse struct {
	id   int64
	typ  string
	data map[string]any
}

// stream reads a run's event stream from after (0: the start) to its end.
func (f *fixture) stream(t *testing.T, id string, after int64) []sse {
	t.Helper()
	req, _ := http.NewRequest("GET", f.http.URL+"/v1/runs/"+id+"/events", nil)
	if after > 0 {
		req.Header.Set("Last-Event-ID", strconv.FormatInt(after, 10))
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Error(err)
		return nil
	}
	defer resp.Body.Close()
	if ct := resp.Header.Get("Content-Type"); resp.StatusCode != 200 || ct != "text/event-stream" {
		t.Errorf("events: %d %s", resp.StatusCode, ct)
		return nil
	}
	return parseSSE(t, resp.Body)
}

// parseSSE reads server-sent events to the end of r.
func parseSSE(t *testing.T, r io.Reader) []sse {
	t.Helper()
	var out []sse
	var cur sse
	sc := bufio.NewScanner(r)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		line := sc.Text()
		switch {
		case line == "":
			if cur.typ != "" {
				out = append(out, cur)
			}
			cur = sse{}
		case strings.HasPrefix(line, "id: "):
			cur.id, _ = strconv.ParseInt(line[4:], 10, 64)
		case strings.HasPrefix(line, "event: "):
			cur.typ = line[7:]
		case strings.HasPrefix(line, "data: "):
			if err := json.Unmarshal([]byte(line[6:]), &cur.data); err != nil {
				t.Errorf("data is not JSON: %s", line)
				return out
			}
		}
	}
	return out
}

// TestRunLifecycle: a run created and waited for, read, listed; its
// events streamed whole, ending with run_end, and resumed from any
// event id with none lost or repeated.
func TestRunLifecycle(t *testing.T) {
	f := newFixture(t, Config{})
	code, res := f.do(t, "POST", "/v1/runs?wait=true", "", `{"agent": "greeter", "input": {"task": "greet Ada"}}`)
	if code != 200 || res["success"] != true || res["result"] != "Hello, Ada." {
		t.Fatalf("%d %v", code, res)
	}
	id := res["id"].(string)
	code, run := f.do(t, "GET", "/v1/runs/"+id, "", "")
	if code != 200 || run["status"] != "completed" || run["agent"] != "greeter" || run["result"] == nil {
		t.Fatalf("get: %d %v", code, run)
	}
	code, list := f.do(t, "GET", "/v1/runs?agent=greeter&status=completed", "", "")
	if runs, _ := list["runs"].([]any); code != 200 || len(runs) != 1 || runs[0].(map[string]any)["run_id"] != id {
		t.Fatalf("list: %d %v", code, list)
	}
	// Pages: two more runs, listed two at a time by cursor.
	for range 2 {
		f.do(t, "POST", "/v1/runs?wait=true", "", `{"agent": "greeter"}`)
	}
	var seen []string
	for cursor, pages := "", 0; ; pages++ {
		code, page := f.do(t, "GET", "/v1/runs?limit=2&since=2000-01-01T00:00:00Z&cursor="+cursor, "", "")
		for _, r := range page["runs"].([]any) {
			seen = append(seen, r.(map[string]any)["run_id"].(string))
		}
		next, _ := page["next_cursor"].(string)
		if code != 200 || next == "" || pages > 3 {
			break
		}
		cursor = next
	}
	if len(seen) != 3 || seen[2] != id {
		t.Errorf("paged: %v, the first run %s last", seen, id)
	}
	all := f.stream(t, id, 0)
	if len(all) < 5 || all[0].typ != "run_start" || all[len(all)-1].typ != "run_end" {
		t.Fatalf("events %v", all)
	}
	for i, e := range all {
		if e.data["type"] != e.typ || e.data["run_id"] != id || (i > 0 && e.id <= all[i-1].id) || e.data["seq"] != float64(e.id) {
			t.Fatalf("event %d: %+v (its seq must be its id)", i, e)
		}
	}
	for cut := range all {
		rest := f.stream(t, id, all[cut].id)
		if len(rest) != len(all)-cut-1 {
			t.Fatalf("resumed after %d: %d events, want %d", all[cut].id, len(rest), len(all)-cut-1)
		}
		for i, e := range rest {
			if e.id != all[cut+1+i].id {
				t.Fatalf("resumed after %d: event %d is %d", all[cut].id, i, e.id)
			}
		}
	}
}

// TestLiveEvents: a client that watches a run from its start sees every
// event as it happens, through run_end, while the run is still going
// when it connects; aborting it ends it as aborted.
func TestLiveEvents(t *testing.T) {
	f := newFixture(t, Config{})
	// The stream is open, and has shown the run's start, before the
	// model answers.
	id, stream := f.waiting(t)
	rd := bufio.NewReader(stream)
	if line, err := rd.ReadString('\n'); err != nil || !strings.HasPrefix(line, "id: ") {
		t.Fatalf("the stream's first line %q, %v", line, err)
	}
	if _, r := f.do(t, "GET", "/v1/runs/"+id, "", ""); r["status"] != "running" {
		t.Fatalf("the run is %v while its model waits", r["status"])
	}
	close(f.release)
	events := parseSSE(t, rd) // the rest of the first event, and on
	if len(events) == 0 {
		t.Fatal("no events")
	}
	last := events[len(events)-1]
	if d, _ := last.data["data"].(map[string]any); last.typ != "run_end" || d["outcome"] != "success" {
		t.Fatalf("live events %v", events)
	}
	// Abort: a run still going ends aborted; one that ended is a conflict.
	f2 := newFixture(t, Config{})
	_, created := f2.do(t, "POST", "/v1/runs", "", `{"agent": "waiter"}`)
	id = created["run_id"].(string)
	waitFor(t, func() bool { _, r := f2.do(t, "GET", "/v1/runs/"+id, "", ""); return r["status"] == "running" })
	if code, body := f2.do(t, "POST", "/v1/runs/"+id+"/abort", "", ""); code != 202 {
		t.Fatalf("abort: %d %v", code, body)
	}
	waitFor(t, func() bool { _, r := f2.do(t, "GET", "/v1/runs/"+id, "", ""); return r["status"] == "aborted" })
	if code, body := f2.do(t, "POST", "/v1/runs/"+id+"/abort", "", ""); code != 409 {
		t.Errorf("abort an ended run: %d %v", code, body)
	}
}

// waitFor polls cond until it holds, failing the test after a long while.
func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		if cond() {
			return
		}
	}
	t.Fatal("the condition never held")
}

// TestErrors: each bad request is answered with its status and a JSON
// error naming the problem.
func TestErrors(t *testing.T) {
	f := newFixture(t, Config{MaxBody: 256})
	for _, tc := range []struct {
		method, path, body string
		status             int
		code, says         string
	}{
		{"GET", "/v1/runs/run_nope", "", 404, "not_found", "run_nope"},
		{"GET", "/v1/runs/run_nope/events", "", 404, "not_found", "run_nope"},
		{"POST", "/v1/runs", `{"agent": "ghost"}`, 404, "not_found", "ghost"},
		{"POST", "/v1/runs", `{"agent": "greeter", "colour": 1}`, 400, "invalid_request", "colour"},
		{"POST", "/v1/runs", `{"agent": "greeter", "spec": {}}`, 400, "invalid_request", "not both"},
		{"POST", "/v1/runs", `{}`, 400, "invalid_request", "names no"},
		{"POST", "/v1/runs", ``, 400, "invalid_request", "empty"},
		{"POST", "/v1/runs", `{"agent": "greeter", "input": {"task": "` + strings.Repeat("x", 300) + `"}}`, 413, "too_large", "256"},
		{"POST", "/v1/runs", `{"spec": {"agent_name": "x"}}`, 400, "invalid_request", "version"},
		{"GET", "/v1/runs?status=sleeping", "", 400, "invalid_request", "sleeping"},
		{"GET", "/v1/runs?limit=0", "", 400, "invalid_request", "limit"},
		{"GET", "/v1/runs?since=yesterday", "", 400, "invalid_request", "since"},
		{"POST", "/v1/runs?wait=yes", `{"agent": "greeter"}`, 400, "invalid_request", "wait"},
		{"GET", "/v2/nothing", "", 404, "not_found", "/v2/nothing"},
		{"PUT", "/v1/runs", "", 404, "not_found", "PUT /v1/runs"},
	} {
		t.Run(tc.method+" "+tc.path+" "+tc.body[:min(len(tc.body), 30)], func(t *testing.T) {
			code, body := f.do(t, tc.method, tc.path, "", tc.body)
			e, _ := body["error"].(map[string]any)
			if code != tc.status || e == nil || e["code"] != tc.code || !strings.Contains(fmt.Sprint(e["message"]), tc.says) {
				t.Errorf("%d %v; want %d %s saying %q", code, body, tc.status, tc.code, tc.says)
			}
		})
	}
}

// TestRoles attacks the roles: no key, an unknown key, a viewer creating
// a run, a runner running an inline spec, are each refused; what each
// role may do it can.
func TestRoles(t *testing.T) {
	keys := []Key{{Name: "val", SHA256: HashKey("view-key"), Role: RoleViewer}, {Name: "rui", SHA256: HashKey("run-key"), Role: RoleRunner},
		{Name: "ada", SHA256: HashKey("admin-key"), Role: RoleAdmin}}
	f := newFixture(t, Config{Keys: keys})
	inline := `{"spec": {"agent_name": "inline", "version": "v1", "system_text": "Greet.", "tools": ["kv_set"]}}`
	for _, tc := range []struct {
		name, method, path, key, body string
		status                        int
	}{
		{"no key", "GET", "/v1/runs", "", "", 401},
		{"an unknown key", "GET", "/v1/runs", "guess", "", 401},
		{"a viewer reads", "GET", "/v1/agents", "view-key", "", 200},
		{"a viewer creates", "POST", "/v1/runs", "view-key", `{"agent": "greeter"}`, 403},
		{"a runner creates", "POST", "/v1/runs?wait=true", "run-key", `{"agent": "greeter"}`, 200},
		{"a runner runs a spec", "POST", "/v1/runs", "run-key", inline, 403},
		{"an admin runs a spec", "POST", "/v1/runs?wait=true", "admin-key", inline, 200},
		{"a runner acts for another user", "POST", "/v1/runs", "run-key", `{"agent": "greeter", "user": "ada"}`, 403},
		{"a runner acts for itself", "POST", "/v1/runs?wait=true", "run-key", `{"agent": "greeter", "user": "rui"}`, 200},
		{"health needs no key", "GET", "/healthz", "", "", 200},
		{"readiness needs no key", "GET", "/readyz", "", "", 200},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, body := f.do(t, tc.method, tc.path, tc.key, tc.body)
			if code != tc.status {
				t.Errorf("%d %v, want %d", code, body, tc.status)
			}
		})
	}
	// An admin's inline spec pauses for approval; a runner does not find
	// it (another user's run, and one it could not have run), an admin
	// resumes it.
	f2 := newFixture(t, Config{Keys: keys}) // its script not yet played
	_, paused := f2.do(t, "POST", "/v1/runs?wait=true", "admin-key", `{"spec": {"agent_name": "ap", "version": "v1", "system_text": "Greet.",
		"tools": ["kv_set"], "policy": {"approval": {"tools": ["kv_set"]}}}}`)
	if paused["terminate_reason"] != "awaiting_approval" {
		t.Fatalf("the inline run: %v", paused)
	}
	pid := paused["id"].(string)
	if code, body := f2.do(t, "POST", "/v1/runs/"+pid+"/resume", "run-key", `{"deny": ["call_1_1"]}`); code != 404 {
		t.Errorf("a runner resumes an inline spec's run: %d %v", code, body)
	}
	if code, body := f2.do(t, "POST", "/v1/runs/"+pid+"/resume?wait=true", "admin-key", `{"deny": ["call_1_1"]}`); code != 200 {
		t.Errorf("an admin resumes it: %d %v", code, body)
	}
	// The audit log names the caller as the key's name.
	runs, _ := f.st.List(context.Background(), store.Filter{Name: "greeter"})
	if len(runs) != 2 {
		t.Fatalf("%d greeter runs", len(runs))
	}
	l, _ := f.st.Records(context.Background(), runs[0].ID, 0)
	if len(l) == 0 || !strings.Contains(string(l[0].Data), `"user_id":"rui"`) {
		t.Errorf("the run does not act for the key's name: %s", l[0].Data)
	}
}

// TestConcurrencyLimit: past MaxRuns a new run is refused with 429 and
// Retry-After; once a run ends there is room again.
func TestConcurrencyLimit(t *testing.T) {
	f := newFixture(t, Config{MaxRuns: 1})
	if code, body := f.do(t, "POST", "/v1/runs", "", `{"agent": "waiter"}`); code != 201 {
		t.Fatalf("%d %v", code, body)
	}
	code, body := f.do(t, "POST", "/v1/runs", "", `{"agent": "greeter"}`)
	if e, _ := body["error"].(map[string]any); code != 429 || e["code"] != "too_many_runs" {
		t.Fatalf("%d %v", code, body)
	}
	close(f.release)
	waitFor(t, func() bool {
		code, _ := f.do(t, "POST", "/v1/runs?wait=true", "", `{"agent": "greeter"}`)
		return code == 200
	})
}

// TestLoadKeys: a keys file is read, and each problem in it named.
func TestLoadKeys(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct{ name, text, says string }{
		{"good", `[{"name": "ci", "sha256": "` + HashKey("k") + `", "role": "runner"}]`, ""},
		{"a bad hash", `[{"name": "ci", "sha256": "abc", "role": "runner"}]`, "64 hex digits"},
		{"a bad role", `[{"name": "ci", "sha256": "` + HashKey("k") + `", "role": "root"}]`, `role "root"`},
		{"no keys", `[]`, "no keys"},
		{"an unknown field", `[{"name": "ci", "key": "k"}]`, "key"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(dir, tc.name+".json")
			writeFile(t, path, tc.text)
			keys, err := LoadKeys(path)
			if tc.says == "" {
				if err != nil || len(keys) != 1 || keys[0].Role != RoleRunner {
					t.Fatalf("%v %v", keys, err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.says) {
				t.Errorf("err = %v, want it to say %q", err, tc.says)
			}
		})
	}
}

// TestResume: a run paused for approval resumes over HTTP. A call id the
// store does not have waiting is refused, whatever the client claims; the
// waiting one, approved, runs, and the run completes; a run that ended
// does not resume.
func TestResume(t *testing.T) {
	f := newFixture(t, Config{})
	spec := `{"spec": {"agent_name": "ap", "version": "v1", "system_text": "Greet.", "tools": ["kv_set"],
		"policy": {"approval": {"tools": ["kv_set"]}}}}`
	code, res := f.do(t, "POST", "/v1/runs?wait=true", "", spec)
	if code != 200 || res["terminate_reason"] != "awaiting_approval" {
		t.Fatalf("%d %v", code, res)
	}
	id := res["id"].(string)
	_, run := f.do(t, "GET", "/v1/runs/"+id, "", "")
	if run["status"] != "awaiting_approval" {
		t.Fatalf("status %v", run["status"])
	}
	waiting := res["waiting"].([]any)[0].(map[string]any)["call_id"].(string)
	for _, tc := range []struct {
		name, body string
		status     int
		says       string
	}{
		{"a call that does not wait", `{"approve": ["call_9_9"]}`, 400, "call_9_9"},
		{"a reason without a denial", `{"approve": ["` + waiting + `"], "reason": "no"}`, 400, "deny"},
		{"an unknown field", `{"approve_all": true}`, 400, "approve_all"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, body := f.do(t, "POST", "/v1/runs/"+id+"/resume", "", tc.body)
			if e, _ := body["error"].(map[string]any); code != tc.status || !strings.Contains(fmt.Sprint(e["message"]), tc.says) {
				t.Errorf("%d %v", code, body)
			}
		})
	}
	code, res = f.do(t, "POST", "/v1/runs/"+id+"/resume?wait=true", "", `{"approve": ["`+waiting+`"]}`)
	if code != 200 || res["success"] != true || res["result"] != "Hello, Ada." {
		t.Fatalf("resumed: %d %v", code, res)
	}
	if code, body := f.do(t, "POST", "/v1/runs/"+id+"/resume", "", `{"approve": ["`+waiting+`"]}`); code != 409 {
		t.Errorf("a completed run resumed: %d %v", code, body)
	}
	// The approval is on record, naming who gave it (no keys: anonymous);
	// the refused attempts wrote nothing.
	_, audit := f.do(t, "GET", "/v1/runs/"+id+"/audit", "", "")
	var human []string
	for _, r := range audit["records"].([]any) {
		rec := r.(map[string]any)
		if rec["decision"] == "approve" {
			human = append(human, fmt.Sprint(rec["decision"], " ", rec["target"], " by ", rec["user_id"]))
		}
	}
	if want := "approve tool:kv_set by anonymous"; len(human) != 1 || human[0] != want {
		t.Errorf("human decisions on record %q, want [%s]", human, want)
	}
}

// TestCanary: a secret in a run's input reaches no API response and no
// event of its stream.
func TestCanary(t *testing.T) {
	const canary = "sk-proj-CANARYserver000000000000000011"
	f := newFixture(t, Config{})
	code, res := f.do(t, "POST", "/v1/runs?wait=true", "", `{"agent": "greeter", "input": {"task": "use `+canary+`"}}`)
	if code != 200 {
		t.Fatalf("%d %v", code, res)
	}
	id := res["id"].(string)
	_, run := f.do(t, "GET", "/v1/runs/"+id, "", "")
	_, list := f.do(t, "GET", "/v1/runs", "", "")
	var events []map[string]any
	for _, e := range f.stream(t, id, 0) {
		events = append(events, e.data)
	}
	if len(events) < 3 {
		t.Fatalf("%d events", len(events))
	}
	for name, v := range map[string]any{"the Result": res, "the run": run, "the list": list, "the events": events} {
		b, _ := json.Marshal(v)
		if strings.Contains(string(b), "CANARYserver") {
			t.Errorf("%s holds the secret", name)
		}
	}
	if b, _ := json.Marshal(res); !strings.Contains(string(b), "[REDACTED") {
		t.Error("the Result shows no redaction at all")
	}
}

// TestInterruptAndResume: a server that closes while a run goes
// interrupts it (kept unended, reported interrupted); another server over
// the same store resumes it to its end, and the run's event stream holds
// one run_end, the resumed run's.
func TestInterruptAndResume(t *testing.T) {
	f := newFixture(t, Config{})
	_, created := f.do(t, "POST", "/v1/runs", "", `{"agent": "waiter", "input": {"task": "wait"}}`)
	id := created["run_id"].(string)
	waitFor(t, func() bool { _, r := f.do(t, "GET", "/v1/runs/"+id, "", ""); return r["status"] == "running" })
	gone, cancel := context.WithCancel(context.Background())
	cancel() // no time to finish: interrupt at once
	if err := f.srv.Close(gone); err != nil {
		t.Fatal(err)
	}
	if run, _ := f.st.Get(context.Background(), id); run.Status != store.Interrupted {
		t.Fatalf("after Close: %s", run.Status)
	}
	// Another server: its waiter answers at once.
	open := make(chan struct{})
	close(open)
	waiter, err := agent.New(&spec.Spec{AgentName: "waiter", Version: "v1", SystemText: "Wait."}, agent.WithProvider(held{open}, "test"))
	if err != nil {
		t.Fatal(err)
	}
	defer waiter.Close()
	next, err := New(Config{Store: f.st, AgentOptions: []agent.Option{agent.WithProvider(held{open}, "test")}})
	if err != nil {
		t.Fatal(err)
	}
	ids, err := next.ResumeInterrupted(context.Background())
	if err != nil || len(ids) != 1 || ids[0] != id {
		t.Fatalf("resumed %v, %v", ids, err)
	}
	ctx, stop := context.WithTimeout(context.Background(), 20*time.Second)
	defer stop()
	if err := next.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if run, _ := f.st.Get(context.Background(), id); run.Status != store.Completed {
		t.Fatalf("after the resume: %s", run.Status)
	}
	ends := 0
	recs, _ := f.st.Records(context.Background(), id, 0)
	for _, r := range recs {
		if r.Kind == store.KindEvent && headOf(r.Data).Type == "run_end" {
			ends++
		}
	}
	events := f.stream(t, id, 0)
	if last := events[len(events)-1]; ends != 1 || last.typ != "run_end" || last.data["data"].(map[string]any)["outcome"] != "success" {
		t.Errorf("%d run_end records; the stream ends with %+v", ends, last)
	}
}

// TestCrossSite attacks a server without keys (every caller an admin)
// the way a web page the user visits would: a form post, a fetch from
// another origin or another port of this machine, a DNS name of the
// attacker's that resolves to loopback. Each is refused before it runs
// anything; the server's own page and a command-line client are not.
func TestCrossSite(t *testing.T) {
	f := newFixture(t, Config{})
	inline := `{"spec": {"agent_name": "evil", "version": "v1", "system_text": "Greet."}}`
	host := strings.TrimPrefix(f.http.URL, "http://")
	for _, tc := range []struct {
		name    string
		headers map[string]string
		status  int
	}{
		{"a form post", map[string]string{"Content-Type": "text/plain"}, 415},
		{"a urlencoded form", map[string]string{"Content-Type": "application/x-www-form-urlencoded"}, 415},
		{"another site's fetch", map[string]string{"Content-Type": "application/json", "Origin": "https://evil.example"}, 403},
		{"another port of this machine", map[string]string{"Content-Type": "application/json", "Origin": "http://127.0.0.1:1"}, 403},
		{"a cross-site request", map[string]string{"Content-Type": "application/json", "Sec-Fetch-Site": "cross-site"}, 403},
		{"DNS rebinding", map[string]string{"Content-Type": "application/json", "Host": "attacker.example"}, 403},
		{"the server's own page", map[string]string{"Content-Type": "application/json", "Origin": "http://" + host, "Sec-Fetch-Site": "same-origin"}, 200},
		{"a command-line client", map[string]string{"Content-Type": "application/json"}, 200},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if code, body := post(t, f.http.URL+"/v1/runs?wait=true", inline, tc.headers); code != tc.status {
				t.Errorf("%d, want %d: %v", code, tc.status, body)
			}
		})
	}
	// Reads are refused to another origin too: a page of another site
	// cannot read the runs through a rebound name.
	req, _ := http.NewRequest("GET", f.http.URL+"/v1/runs", nil)
	req.Host = "attacker.example"
	if resp, err := http.DefaultClient.Do(req); err != nil || resp.StatusCode != 403 {
		t.Errorf("a rebound read: %v %v", resp, err)
	} else {
		resp.Body.Close()
	}
}

// TestStopping: once Close has begun, a new run is answered 503 rather
// than started behind its back; the runs going finish.
func TestStopping(t *testing.T) {
	f := newFixture(t, Config{})
	code, created := f.do(t, "POST", "/v1/runs", "", `{"agent": "waiter"}`)
	if code != 201 {
		t.Fatalf("%d %v", code, created)
	}
	closed := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		closed <- f.srv.Close(ctx)
	}()
	waitFor(t, func() bool {
		code, _ := f.do(t, "POST", "/v1/runs", "", `{"agent": "greeter"}`)
		return code == 503
	})
	close(f.release)
	if err := <-closed; err != nil {
		t.Fatal(err)
	}
	if _, run := f.do(t, "GET", "/v1/runs/"+created["run_id"].(string), "", ""); run["status"] != "completed" {
		t.Errorf("the run going at Close: %v", run["status"])
	}
}

// TestResumeInterruptedKeepsRoles: a run whose agent only admins may run,
// interrupted by a server's Close, is resumed by the next server with no
// caller at all: it goes on with the roles it started with, instead of
// failing the access rule.
func TestResumeInterruptedKeepsRoles(t *testing.T) {
	ctx := context.Background()
	st, err := store.Open(ctx, filepath.Join(t.TempDir(), "runs.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	guarded := func(release chan struct{}) *agent.Registry {
		a, err := agent.New(&spec.Spec{AgentName: "guarded", Version: "v1", SystemText: "Wait.",
			Policy: &policy.Policy{Access: &policy.Access{Run: []string{"admin"}}}}, agent.WithProvider(held{release}, "test"))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { a.Close() })
		reg := agent.NewRegistry()
		reg.Register(a)
		return reg
	}
	first, err := New(Config{Store: st, Agents: guarded(make(chan struct{}))})
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(first)
	_, created := post(t, hs.URL+"/v1/runs", `{"agent": "guarded"}`, nil)
	id, _ := created["run_id"].(string)
	waitFor(t, func() bool { r, err := st.Get(ctx, id); return err == nil && r.Status == store.Running })
	gone, cancel := context.WithCancel(ctx)
	cancel()
	first.Close(gone)
	hs.Close()

	open := make(chan struct{})
	close(open)
	next, err := New(Config{Store: st, Agents: guarded(open), AgentOptions: []agent.Option{agent.WithProvider(held{open}, "test")}})
	if err != nil {
		t.Fatal(err)
	}
	if ids, err := next.ResumeInterrupted(ctx); err != nil || len(ids) != 1 {
		t.Fatalf("resumed %v, %v", ids, err)
	}
	done, stop := context.WithTimeout(ctx, 20*time.Second)
	defer stop()
	next.Close(done)
	if r, _ := st.Get(ctx, id); r.Status != store.Completed {
		t.Errorf("the resumed run is %s (%s)", r.Status, r.Error)
	}
}

// TestSlowClient: a client that opens a run's stream and reads nothing
// does not hold the run back: the run ends while the client sleeps, and
// the client, reading at last, gets every event to run_end.
func TestSlowClient(t *testing.T) {
	f := newFixture(t, Config{})
	id, stream := f.waiting(t)
	close(f.release) // the run goes on; the client reads nothing yet
	waitFor(t, func() bool { _, r := f.do(t, "GET", "/v1/runs/"+id, "", ""); return r["status"] == "completed" })
	events := parseSSE(t, stream)
	if len(events) < 3 || events[0].typ != "run_start" || events[len(events)-1].typ != "run_end" {
		t.Errorf("the slow client's events: %v", events)
	}
}

// TestTraceParent: a run joins the trace of the request's traceparent,
// read as OpenTelemetry's propagator reads it (a later version by its
// first four fields), and keeps its tracestate; a malformed traceparent
// is ignored, as the W3C standard says, not refused, and a malformed
// tracestate dropped.
func TestTraceParent(t *testing.T) {
	f := newFixture(t, Config{})
	const tp = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	for _, tc := range []struct{ tp, ts, want, wantTS string }{
		{tp, "", "4bf92f3577b34da6a3ce929d0e0e4736", ""},
		{tp, "vendor=a,other=b", "4bf92f3577b34da6a3ce929d0e0e4736", "vendor=a,other=b"},
		{tp, "not a list", "4bf92f3577b34da6a3ce929d0e0e4736", ""},
		{"00-not-a-trace-01", "vendor=a", "", ""},
		// A later version is read as W3C says: its first four fields.
		{"01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-what-comes-next", "", "4bf92f3577b34da6a3ce929d0e0e4736", ""},
		{"ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", "", "", ""},
		{"00-00000000000000000000000000000000-00f067aa0ba902b7-01", "", "", ""},
	} {
		select {
		case <-f.release:
		default:
			close(f.release)
		}
		code, res := post(t, f.http.URL+"/v1/runs?wait=true", `{"agent": "waiter"}`, map[string]string{"Traceparent": tc.tp, "Tracestate": tc.ts})
		if got, _ := res["trace_id"].(string); code != 200 || got != tc.want {
			t.Errorf("traceparent %q: %d, trace_id %q, want %q", tc.tp, code, got, tc.want)
		}
		id, _ := res["id"].(string)
		l, err := runlog.Read(context.Background(), f.st, id)
		if err != nil {
			t.Fatal(err)
		}
		if l.Start.TraceState != tc.wantTS {
			t.Errorf("traceparent %q, tracestate %q: the run keeps tracestate %q, want %q", tc.tp, tc.ts, l.Start.TraceState, tc.wantTS)
		}
	}
}

// TestRunModel: a run may name another model for its agent; the served
// agent keeps its own.
func TestRunModel(t *testing.T) {
	f := newFixture(t, Config{Models: []string{"scripted:other-model"}})
	code, res := f.do(t, "POST", "/v1/runs?wait=true", "", `{"agent": "greeter", "model": "scripted:other-model"}`)
	if code != 200 || res["model"] != "other-model" {
		t.Fatalf("%d model %v", code, res["model"])
	}
	if code, body := f.do(t, "POST", "/v1/runs", "", `{"pipeline": "p", "model": "x:y"}`); code != 400 {
		t.Errorf("a model for a pipeline: %d %v", code, body)
	}
	if _, res := f.do(t, "POST", "/v1/runs?wait=true", "", `{"agent": "greeter"}`); res["model"] == "other-model" {
		t.Errorf("the served agent took the run's model: %v", res["model"])
	}
}

// TestRequestLog: the server's logger gets a record of each request
// answered, naming its route, status, caller, run and trace; an event
// stream's when it ends.
func TestRequestLog(t *testing.T) {
	var buf syncbuf.Buffer
	keys := []Key{{Name: "rui", SHA256: HashKey("run-key"), Role: RoleRunner}}
	f := newFixture(t, Config{Keys: keys, Logger: slog.New(slog.NewJSONHandler(&buf, nil))})
	post(t, f.http.URL+"/v1/runs?wait=true", `{"agent": "greeter"}`,
		map[string]string{"Authorization": "Bearer run-key", "Traceparent": "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"})
	f.do(t, "GET", "/v1/runs/nope", "run-key", "")
	var recs []map[string]any
	for _, line := range strings.Split(strings.TrimSpace(buf.String()), "\n") {
		var r map[string]any
		json.Unmarshal([]byte(line), &r)
		recs = append(recs, r)
	}
	if len(recs) != 2 {
		t.Fatalf("records: %s", buf.String())
	}
	if r := recs[0]; r["route"] != "POST /v1/runs" || r["status"] != 200.0 || r["user_id"] != "rui" || r["trace_id"] != "4bf92f3577b34da6a3ce929d0e0e4736" {
		t.Errorf("the run's request: %v", r)
	}
	if r := recs[1]; r["route"] != "GET /v1/runs/{id}" || r["status"] != 404.0 || r["run_id"] != "nope" {
		t.Errorf("a missing run's request: %v", r)
	}
}

// TestBadKeys: New refuses keys LoadKeys would, naming the problem.
func TestBadKeys(t *testing.T) {
	st, err := store.Open(context.Background(), filepath.Join(t.TempDir(), "runs.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	for _, tc := range []struct {
		key  Key
		says string
	}{
		{Key{Name: "a", SHA256: "xyz", Role: RoleAdmin}, "64 hex"},
		{Key{Name: "a", SHA256: HashKey("k"), Role: "root"}, "root"},
		{Key{SHA256: HashKey("k"), Role: RoleViewer}, "no name"},
	} {
		if _, err := New(Config{Store: st, Keys: []Key{tc.key}}); err == nil || !strings.Contains(err.Error(), tc.says) {
			t.Errorf("%+v: %v, want an error saying %q", tc.key, err, tc.says)
		}
	}
}

// TestHeartbeat: a stream whose run is quiet (its model thinking) gets
// comment lines that keep proxies from closing it, and goes on after.
func TestHeartbeat(t *testing.T) {
	f := newFixture(t, Config{})
	f.srv.heartbeat = 20 * time.Millisecond
	_, stream := f.waiting(t)
	rd := bufio.NewReader(stream)
	for {
		line, err := rd.ReadString('\n')
		if err != nil {
			t.Fatalf("the stream ended before a heartbeat: %v", err)
		}
		if line == ": heartbeat\n" {
			break
		}
	}
	close(f.release)
	if events := parseSSE(t, rd); len(events) == 0 || events[len(events)-1].typ != "run_end" {
		t.Errorf("after the heartbeat: %v", events)
	}
}

// TestClientGoes: a client that stops waiting (?wait=true) does not end
// the run: it goes on to its end, for anyone to read.
func TestClientGoes(t *testing.T) {
	f := newFixture(t, Config{})
	ctx, cancel := context.WithCancel(context.Background())
	req, _ := http.NewRequestWithContext(ctx, "POST", f.http.URL+"/v1/runs?wait=true", strings.NewReader(`{"agent": "waiter"}`))
	req.Header.Set("Content-Type", "application/json")
	errc := make(chan error, 1)
	go func() {
		resp, err := http.DefaultClient.Do(req)
		if err == nil {
			resp.Body.Close()
		}
		errc <- err
	}()
	var id string
	waitFor(t, func() bool {
		runs, _ := f.st.List(context.Background(), store.Filter{Name: "waiter"})
		if len(runs) == 1 && runs[0].Status == store.Running {
			id = runs[0].ID
		}
		return id != ""
	})
	cancel()
	if err := <-errc; err == nil {
		t.Fatal("the request did not end with its client")
	}
	close(f.release)
	waitFor(t, func() bool { _, r := f.do(t, "GET", "/v1/runs/"+id, "", ""); return r["status"] == "completed" })
}

// TestStreamLimit: past MaxStreams a new event stream is refused with
// 429 and Retry-After; once one closes there is room again.
func TestStreamLimit(t *testing.T) {
	f := newFixture(t, Config{MaxStreams: 1})
	id, stream := f.waiting(t)
	if code, body := f.do(t, "GET", "/v1/runs/"+id+"/events", "", ""); code != 429 {
		t.Errorf("a second stream: %d %v", code, body)
	}
	close(f.release)
	parseSSE(t, stream) // to the run's end: the stream closes
	stream.Close()
	waitFor(t, func() bool {
		req, _ := http.NewRequest("GET", f.http.URL+"/v1/runs/"+id+"/events", nil)
		r, err := http.DefaultClient.Do(req)
		if err != nil {
			return false
		}
		r.Body.Close()
		return r.StatusCode == 200
	})
}
