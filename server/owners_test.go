package server

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/agentry/agentry/agent"
	evaluation "github.com/agentry/agentry/eval"
	"github.com/agentry/agentry/llm"
	"github.com/agentry/agentry/policy"
	"github.com/agentry/agentry/spec"
	"github.com/agentry/agentry/store"
)

// The keys of the ownership tests: two users (alice, who owns the runs,
// tasks and evaluations the tests reach for, and bob, a stranger to
// them), each with a viewer's and a runner's key; a viewer and a runner
// that reach every user's runs; an admin.
var ownerKeys = []Key{
	{Name: "alice", SHA256: HashKey("alice-view"), Role: RoleViewer},
	{Name: "alice", SHA256: HashKey("alice-run"), Role: RoleRunner},
	{Name: "bob", SHA256: HashKey("bob-view"), Role: RoleViewer},
	{Name: "bob", SHA256: HashKey("bob-run"), Role: RoleRunner},
	{Name: "carol", SHA256: HashKey("carol-all"), Role: RoleViewer, AllUsers: true},
	{Name: "dave", SHA256: HashKey("dave-allrun"), Role: RoleRunner, AllUsers: true},
	{Name: "root", SHA256: HashKey("root-key"), Role: RoleAdmin},
}

// callers are every kind of caller a route is tried by, in the order of
// a matrix row's outcomes.
var callers = []struct{ name, key string }{
	{"anonymous", ""},
	{"owner's viewer", "alice-view"},
	{"owner's runner", "alice-run"},
	{"stranger's viewer", "bob-view"},
	{"stranger's runner", "bob-run"},
	{"all-users viewer", "carol-all"},
	{"all-users runner", "dave-allrun"},
	{"admin", "root-key"},
}

// polite is a model that answers every run the same way, whatever came
// before: a call of the agent's first tool, then "Hello." once the
// call's result is back (or at once, for an agent with no tool).
type polite struct{}

func (polite) Generate(_ context.Context, req *llm.Request) (*llm.Response, error) {
	if len(req.Tools) == 0 || req.Messages[len(req.Messages)-1].Role == llm.RoleTool {
		return &llm.Response{Content: "Hello."}, nil
	}
	return &llm.Response{Content: "Storing.", ToolCalls: []llm.ToolCall{{ID: "call_1", Name: req.Tools[0].Name,
		Arguments: json.RawMessage(`{"key": "k", "value": "v"}`)}}}, nil
}

// politeAgents are greeter (answers at once) and approver (its one tool
// call waits for a person), both of the polite model, and the options
// they were built with.
func politeAgents(tb testing.TB) (*agent.Registry, []agent.Option) {
	tb.Helper()
	opts := []agent.Option{agent.WithProvider(polite{}, "test"), agent.WithTools(kvRegistry(tb))}
	reg := agent.NewRegistry()
	for _, js := range []string{
		`{"agent_name": "greeter", "version": "v1", "system_text": "Greet."}`,
		`{"agent_name": "approver", "version": "v1", "system_text": "Store.", "tools": ["kv_set"], "policy": {"approval": {"tools": ["kv_set"]}}}`,
	} {
		sp, err := spec.Parse("spec", []byte(js))
		if err != nil {
			tb.Fatal(err)
		}
		a, err := agent.New(sp, opts...)
		if err != nil {
			tb.Fatal(err)
		}
		if err := reg.Register(a); err != nil {
			tb.Fatal(err)
		}
	}
	return reg, opts
}

// ownersFixture is a server with ownerKeys over a fresh SQLite store,
// serving greeter (answers at once), approver (its one tool call waits
// for a person) and waiter (held until the test ends).
type ownersFixture struct {
	*fixture
	done, paused, eval string // alice's completed run, paused run and evaluation
	conv, busy         string // alice's conversations: one with a run that ended, one whose run goes on
}

func newOwnersFixture(t *testing.T, c Config) *ownersFixture {
	t.Helper()
	ctx := context.Background()
	st, err := store.Open(ctx, filepath.Join(t.TempDir(), "runs.db"))
	if err != nil {
		t.Fatal(err)
	}
	f := &fixture{st: st, release: make(chan struct{})}
	reg, opts := politeAgents(t)
	waiter, err := agent.New(&spec.Spec{AgentName: "waiter", Version: "v1", SystemText: "Wait."}, agent.WithProvider(held{f.release}, "test"))
	if err != nil {
		t.Fatal(err)
	}
	if err := reg.Register(waiter); err != nil {
		t.Fatal(err)
	}
	c.Store, c.Agents, c.Keys = st, reg, ownerKeys
	c.AgentOptions = append(c.AgentOptions, opts...)
	if c.A2AAgent == "" {
		c.A2AAgent = "greeter"
	}
	f.srv, err = New(c)
	if err != nil {
		t.Fatal(err)
	}
	f.http = httptest.NewServer(f.srv)
	f.cleanup(t, reg, st)
	o := &ownersFixture{fixture: f}
	code, res := f.do(t, "POST", "/v1/runs?wait=true", "alice-run", `{"agent": "greeter"}`)
	if code != 200 || res["success"] != true {
		t.Fatalf("alice's run: %d %v", code, res)
	}
	o.done = res["id"].(string)
	code, res = f.do(t, "POST", "/v1/runs?wait=true", "alice-run", `{"agent": "approver"}`)
	if code != 200 || res["terminate_reason"] != "awaiting_approval" {
		t.Fatalf("alice's paused run: %d %v", code, res)
	}
	o.paused = res["id"].(string)
	// An evaluation run for alice (in Go: agentry eval runs as the local
	// operator).
	ds, err := evaluation.Parse("triage.json", []byte(triageData))
	if err != nil {
		t.Fatal(err)
	}
	rep, err := evaluation.Run(policy.WithPrincipal(ctx, policy.Principal{UserID: "alice", Roles: []string{"runner"}}), ds,
		[]evaluation.Target{triageAgent(t, "v1")}, evaluation.Options{Store: st})
	if err != nil {
		t.Fatal(err)
	}
	o.eval = rep.ID
	o.conv = o.conversation(t, "greeter", "?wait=true")
	o.busy = o.conversation(t, "waiter", "")
	return o
}

// conversation makes one of alice's conversations with agent, and says
// something in it (wait: "?wait=true" to let the run end).
func (o *ownersFixture) conversation(t *testing.T, agent, wait string) string {
	t.Helper()
	code, conv := o.do(t, "POST", "/v1/conversations", "alice-run", `{"agent": "`+agent+`"}`)
	if code != 201 {
		t.Fatalf("alice's conversation: %d %v", code, conv)
	}
	id := conv["id"].(string)
	if code, res := o.do(t, "POST", "/v1/conversations/"+id+"/messages"+wait, "alice-run", `{"message": "hi"}`); code != 200 && code != 201 {
		t.Fatalf("alice's message: %d %v", code, res)
	}
	return id
}

// raw sends a request and returns its status, headers and body, whatever
// the body is (JSON, an event stream read to its end or for a second).
func (f *fixture) raw(t *testing.T, method, path, key, body string, header ...string) (int, http.Header, []byte) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, method, f.http.URL+path, strings.NewReader(body))
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	req.Header.Set("Accept", "application/json, text/event-stream")
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Add(header[i], header[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	var data []byte
	if strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		// A stream: what comes within a second (an event stream of a run
		// going on stays open).
		done := make(chan []byte)
		go func() {
			b, _ := io.ReadAll(resp.Body)
			done <- b
		}()
		select {
		case data = <-done:
		case <-time.After(time.Second):
			cancel()
			data = <-done
		}
	} else {
		data, _ = io.ReadAll(resp.Body)
	}
	return resp.StatusCode, resp.Header, data
}

// rpcError is the JSON-RPC error code of an A2A answer (its first event,
// for a stream), 0 when it has none.
func rpcError(data []byte) int {
	if bytes.HasPrefix(bytes.TrimSpace(data), []byte("{")) {
		var m struct {
			Error *struct{ Code int } `json:"error"`
		}
		json.Unmarshal(data, &m)
		if m.Error != nil {
			return m.Error.Code
		}
		return 0
	}
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		if line, ok := strings.CutPrefix(sc.Text(), "data: "); ok {
			return rpcError([]byte(line))
		}
	}
	return 0
}
