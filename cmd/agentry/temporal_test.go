package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentry/agentry/internal/syncbuf"
	"github.com/agentry/agentry/internal/testdb"
	"github.com/agentry/agentry/store"
	"github.com/agentry/agentry/temporal"
)

// counter is a service of effects: each POST with a new Idempotency-Key
// takes effect once; a repeat of a key is answered without a second
// effect. A POST to /gate takes effect, then waits until the gate opens
// (or its client goes away) before it answers: a call in flight whose
// effect took place.
type counter struct {
	mu         sync.Mutex
	effects    map[string]int // applied, by key: never above 1
	deliveries map[string]int // requests, by key
	noKey      int
	gate       chan struct{} // /gate answers once it is open
	gated      chan string   // the key of each POST that reached the gate
	open       func()        // opens the gate
}

func newCounter(t *testing.T) (*counter, string) {
	c := &counter{effects: map[string]int{}, deliveries: map[string]int{}, gate: make(chan struct{}), gated: make(chan string, 256)}
	var once sync.Once
	c.open = func() { once.Do(func() { close(c.gate) }) }
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		key := r.Header.Get("Idempotency-Key")
		c.mu.Lock()
		if key == "" {
			c.noKey++
			c.mu.Unlock()
			http.Error(w, "an effect needs an Idempotency-Key", http.StatusBadRequest)
			return
		}
		c.deliveries[key]++
		if c.deliveries[key] == 1 {
			c.effects[key]++
		}
		c.mu.Unlock()
		if r.URL.Path == "/gate" {
			select {
			case c.gated <- key:
			default:
			}
			select {
			case <-c.gate:
			case <-r.Context().Done():
				return // the caller died: the effect took place, the answer is lost
			}
		}
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, `{"applied":true}`)
	}))
	t.Cleanup(srv.Close)
	t.Cleanup(c.open) // first (cleanups run last first): a call at the gate holds Close
	return c, srv.URL
}

func (c *counter) count() (effects, deliveries int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, n := range c.deliveries {
		deliveries += n
	}
	return len(c.effects), deliveries
}

// posterAgent writes an agent whose two turns POST an effect each to
// url, and answers on the third, and returns its spec's path.
func posterAgent(t *testing.T, url string) string {
	t.Helper()
	spec, _ := posterAgents(t, url, "effect", "effect")
	return spec
}

// posterAgents writes the poster agent, its turns POSTing to url's
// paths first and second, in an agents directory of its own (the
// layout serve and worker read), and returns its spec's path and the
// directory.
func posterAgents(t *testing.T, url, first, second string) (spec, agents string) {
	t.Helper()
	base := t.TempDir()
	agents = filepath.Join(base, "agents")
	dir := filepath.Join(agents, "poster")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	host := strings.TrimPrefix(url, "http://")
	host, _, _ = strings.Cut(host, ":")
	specJSON := fmt.Sprintf(`{"agent_name": "poster", "version": "1.0.0", "mode": "tools",
  "model_name": "scripted:../../poster.turns.json", "system_text": "You post effects.", "purpose_text": "${task}",
  "input_keys": ["task"], "tools": ["http_request"], "limits": {"max_turns": 5},
  "policy": {"network": {"allow_private": true, "idempotency_key_hosts": [%q]}}}`, host)
	turns := fmt.Sprintf(`{"model": "gpt-4.1-mini", "turns": [
  {"tool_calls": [{"name": "http_request", "arguments": {"method": "POST", "url": "%[1]s/%[2]s", "body": "effect 1"}}], "usage": {"prompt_tokens": 30, "completion_tokens": 10}},
  {"tool_calls": [{"name": "http_request", "arguments": {"method": "POST", "url": "%[1]s/%[3]s", "body": "effect 2"}}], "usage": {"prompt_tokens": 40, "completion_tokens": 10}},
  {"content": "Both effects posted.", "usage": {"prompt_tokens": 50, "completion_tokens": 5}}]}`, url, first, second)
	for path, body := range map[string]string{filepath.Join(dir, "1.0.0.json"): specJSON, filepath.Join(base, "poster.turns.json"): turns} {
		if err := os.WriteFile(path, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return filepath.Join(dir, "1.0.0.json"), agents
}

// worker is an agentry worker process.
type workerProc struct {
	cmd *exec.Cmd
	out *syncbuf.Buffer
}

func startWorker(t *testing.T, args ...string) *workerProc {
	t.Helper()
	w := &workerProc{out: &syncbuf.Buffer{}}
	w.cmd = exec.Command(binary(t), append([]string{"worker"}, args...)...)
	w.cmd.Stdout, w.cmd.Stderr = w.out, w.out
	if err := w.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if w.cmd.ProcessState == nil {
			w.cmd.Process.Kill()
			w.cmd.Wait()
		}
	})
	for deadline := time.Now().Add(30 * time.Second); !strings.Contains(w.out.String(), "agentry worker: task queue"); time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the worker did not start:\n%s", w.out)
		}
	}
	return w
}

// Two workers share fifty runs; one is killed with SIGKILL while calls
// it sent are in flight, their effects taken place and their answers not
// yet back. Every run completes, on the other worker, and the service
// saw each effect exactly once: a POST whose worker died is sent again
// with its key (its host deduplicates), never as a new effect.
func TestTemporalWorkersSurviveSIGKILL(t *testing.T) {
	hostPort, c := testdb.Temporal(t)
	db := testdb.Postgres(t)
	svc, url := newCounter(t)
	spec, _ := posterAgents(t, url, "gate", "effect") // the first call of each run waits at the gate
	const queue, runs = "scale-test", 50
	args := []string{"--temporal", hostPort, "--task-queue", queue, "--db", db, "--allow-private-network"}
	doomed := startWorker(t, args...)

	ids := make([]string, runs)
	var wg sync.WaitGroup
	sem := make(chan struct{}, 8)
	for i := range ids {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sem <- struct{}{}
			defer func() { <-sem }()
			code, out, errs := runCLI(t, "run", spec, "--input", fmt.Sprintf("task=effect %d", i), "--temporal", hostPort, "--task-queue", queue, "--detach")
			if code != 0 {
				t.Errorf("run --detach: exit %d: %s", code, errs)
			}
			ids[i] = strings.TrimSpace(out)
		}()
	}
	wg.Wait()
	if t.Failed() {
		t.FailNow()
	}
	// The first worker alone has sent calls; some took effect and wait
	// at the gate for their answers. The second joins; the first dies.
	inFlight := 0
	for deadline := time.After(3 * time.Minute); inFlight < 10; inFlight++ {
		select {
		case <-svc.gated:
		case <-deadline:
			t.Fatalf("%d calls reached the gate:\n%s", inFlight, doomed.out)
		}
	}
	survivor := startWorker(t, args...)
	if err := doomed.cmd.Process.Kill(); err != nil { // SIGKILL
		t.Fatal(err)
	}
	doomed.cmd.Wait()
	svc.open()

	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	st, err := store.Open(ctx, db)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	for _, id := range ids {
		out, err := temporal.Wait(ctx, c, id)
		if err != nil {
			p, perr := temporal.Query(context.Background(), c, id)
			run, _ := st.Get(context.Background(), id)
			t.Fatalf("run %s: %v\nprogress %+v (%v)\nstored %+v\nsurvivor:\n%s", id, err, p, perr, run, survivor.out)
		}
		var res struct {
			Success bool `json:"success"`
			Result  any  `json:"result"`
		}
		json.Unmarshal(out.Result, &res)
		if out.Status != "completed" || !res.Success || res.Result != "Both effects posted." {
			t.Errorf("run %s: %s, %v", id, out.Status, res.Result)
		}
		if run, err := st.Get(ctx, id); err != nil || run.Status != store.Completed || run.Holder != "" {
			t.Errorf("stored run %s: %+v (%v)", id, run, err)
		}
	}
	effects, deliveries := svc.count()
	svc.mu.Lock()
	defer svc.mu.Unlock()
	if effects != 2*runs || svc.noKey != 0 {
		t.Errorf("%d effects (%d requests without a key); want %d, one per POST", effects, svc.noKey, 2*runs)
	}
	for _, id := range ids {
		for turn := 1; turn <= 2; turn++ {
			key := fmt.Sprintf("%s:%d:0", id, turn)
			if svc.effects[key] != 1 {
				t.Errorf("effect %s took place %d times", key, svc.effects[key])
			}
		}
	}
	// The calls the killed worker had in flight were sent again, with
	// their keys, and took no second effect.
	if deliveries-effects < inFlight {
		t.Errorf("%d requests for %d effects; want at least the %d calls in flight at the kill sent again", deliveries, effects, inFlight)
	}
	t.Logf("%d effects; %d requests (%d sent again after the kill, with their keys)", effects, deliveries, deliveries-effects)
}

// sameResult compares two Results printed by run --json, without what
// differs between two runs of the same work: ids, times, durations.
func sameResult(t *testing.T, a, b string) {
	t.Helper()
	norm := func(s string) string {
		var v map[string]any
		if err := json.Unmarshal([]byte(s), &v); err != nil {
			t.Fatalf("not a Result: %v\n%s", err, s)
		}
		var strip func(any)
		strip = func(x any) {
			switch x := x.(type) {
			case map[string]any:
				for k, val := range x {
					switch {
					case k == "id" || k == "run_id" || k == "session_id" || k == "trace_ref" || k == "timestamp" || strings.HasSuffix(k, "_at") || strings.HasSuffix(k, "_ms"):
						delete(x, k)
					case k == "tool_latency_ms":
						delete(x, k)
					default:
						strip(val)
					}
				}
			case []any:
				for _, e := range x {
					strip(e)
				}
			}
		}
		strip(v)
		out, _ := json.MarshalIndent(v, "", " ")
		return strings.ReplaceAll(string(out), "run_", "")
	}
	if na, nb := norm(a), norm(b); na != nb {
		t.Errorf("Results differ:\n%s\n---\n%s", na, nb)
	}
}

// What a local run offers, a run on Temporal offers through the same
// commands: the same Result JSON, its trace, listing and replay; a run
// that waits for approval is decided with resume --temporal (and only
// there), and its resume waits for its next pause.
func TestTemporalCLI(t *testing.T) {
	hostPort, _ := testdb.Temporal(t)
	svc, url := newCounter(t)
	spec := posterAgent(t, url)
	dir := t.TempDir()
	db := filepath.Join(dir, "runs.db")
	startWorker(t, "--temporal", hostPort, "--db", db, "--allow-private-network")

	code, onTemporal, errs := runCLI(t, "run", spec, "--input", "task=two effects", "--temporal", hostPort, "--json", "-q")
	if code != 0 {
		t.Fatalf("run --temporal: exit %d: %s", code, errs)
	}
	code, local, errs := runCLI(t, "run", spec, "--input", "task=two effects", "--json", "-q", "--db", filepath.Join(dir, "local.db"), "--allow-private-network")
	if code != 0 {
		t.Fatalf("local run: exit %d: %s", code, errs)
	}
	sameResult(t, onTemporal, local)
	var res struct {
		ID string `json:"id"`
	}
	json.Unmarshal([]byte(onTemporal), &res)
	if code, out, errs := runCLI(t, "trace", res.ID, "--db", db); code != 0 || !strings.Contains(out, "turn 3") || strings.Contains(out, "resumed") {
		t.Errorf("trace: exit %d: %s%s", code, out, errs)
	}
	if code, out, errs := runCLI(t, "replay", res.ID, "--db", db); code != 0 {
		t.Errorf("replay of the Temporal run: exit %d: %s%s", code, out, errs)
	}
	if code, out, _ := runCLI(t, "runs", "--db", db); code != 0 || !strings.Contains(out, res.ID) || !strings.Contains(out, "completed") {
		t.Errorf("runs: %s", out)
	}

	// A run that waits for a person.
	approval := filepath.Join(filepath.Dir(spec), "2.0.0.json")
	data, _ := os.ReadFile(spec)
	os.WriteFile(approval, []byte(strings.Replace(string(data), `"policy": {`, `"policy": {"approval": {"tools": ["http_request"]}, `, 1)), 0o600)
	code, out, errs := runCLI(t, "run", approval, "--input", "task=approved effects", "--temporal", hostPort, "--json", "-q")
	if code != 3 || !strings.Contains(errs, "waits for approval") || !strings.Contains(out, `"awaiting_approval"`) {
		t.Fatalf("a run that waits: exit %d: %s\n%s", code, out, errs)
	}
	json.Unmarshal([]byte(out), &res)
	if code, _, errs := runCLI(t, "resume", res.ID, "--approve", res.ID+":1:0", "--db", db); code != 2 || !strings.Contains(errs, "driven by Temporal") {
		t.Errorf("a local resume of a run Temporal drives: exit %d: %s", code, errs)
	}
	if code, _, errs := runCLI(t, "resume", res.ID, "--approve", "no-such-call", "--db", db, "--temporal", hostPort); code != 2 || !strings.Contains(errs, res.ID+":1:0") {
		t.Errorf("approving no waiting call: exit %d: %s", code, errs)
	}
	code, _, errs = runCLI(t, "resume", res.ID, "--approve", res.ID+":1:0", "--db", db, "--temporal", hostPort, "-q")
	if code != 3 || !strings.Contains(errs, res.ID+":2:0") {
		t.Errorf("the first approval: exit %d (want 3: the run waits again, for %s:2:0): %s", code, res.ID, errs)
	}
	code, out, errs = runCLI(t, "resume", res.ID, "--approve", res.ID+":2:0", "--db", db, "--temporal", hostPort, "-q")
	if code != 0 || strings.TrimSpace(out) != "Both effects posted." {
		t.Errorf("the second approval: exit %d: %s%s", code, out, errs)
	}
	for turn := 1; turn <= 2; turn++ {
		key := fmt.Sprintf("%s:%d:0", res.ID, turn)
		svc.mu.Lock()
		n := svc.effects[key]
		svc.mu.Unlock()
		if n != 1 {
			t.Errorf("approved effect %s took place %d times", key, n)
		}
	}
	if code, _, errs := runCLI(t, "run", spec, "--detach"); code != 2 || !strings.Contains(errs, "--temporal") {
		t.Errorf("--detach without --temporal: exit %d: %s", code, errs)
	}
}

// Two servers over one Postgres store see the same runs: a run started
// on one is watched live (SSE) and aborted on the other. The lease keeps
// the second from driving it meanwhile; its abort breaks the first's
// lease, so the first, once its call returns, writes nothing more, and
// the run ends aborted, on record, once.
func TestTwoServersOnePostgres(t *testing.T) {
	db := testdb.Postgres(t)
	svc, url := newCounter(t)
	_, agents := posterAgents(t, url, "gate", "effect")
	a := startServe(t, "--agents", agents, "--db", db, "--allow-private-network")
	b := startServe(t, "--agents", agents, "--db", db, "--allow-private-network")

	// A client of A waits for the run's Result.
	waited := a.waiting(t, "/v1/runs?wait=true", `{"agent": "poster", "input": {"task": "watched elsewhere"}}`)
	id := gatedRun(t, svc, b)
	code, run := b.call(t, "GET", "/v1/runs/"+id, "", "")
	if code != 200 || run["status"] != "running" {
		t.Fatalf("B sees the run as %d %v", code, run)
	}
	// B streams the run's events as A writes them.
	_, types := b.sse(t, id, 0, func(typ string) bool { return typ == "tool_call_start" })
	if len(types) == 0 || types[0] != "run_start" || types[len(types)-1] != "tool_call_start" {
		t.Fatalf("B's stream of the run A drives: %v", types)
	}
	if code, body := b.call(t, "POST", "/v1/runs/"+id+"/resume", "", `{}`); code != 409 {
		t.Errorf("B resumed a run A drives: %d %v", code, body)
	}
	if code, body := b.call(t, "POST", "/v1/runs/"+id+"/abort", "", ""); code != 202 {
		t.Fatalf("abort on B: %d %v\n%s", code, body, b.out)
	}
	b.waitStatus(t, id, "aborted")
	svc.open() // A's call returns now: A may write nothing of it
	// Until A's session let go of the run: A then says it does not drive it.
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(50 * time.Millisecond) {
		_, body := a.call(t, "POST", "/v1/runs/"+id+"/abort", "", "")
		if e, _ := body["error"].(map[string]any); e != nil && strings.Contains(fmt.Sprint(e["message"]), "not driven by this server") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("A still drives the run after its lease was broken:\n%s", a.out)
		}
	}
	if code, run := a.call(t, "GET", "/v1/runs/"+id, "", ""); code != 200 || run["status"] != "aborted" {
		t.Errorf("A sees the run as %d %v; want aborted", code, run)
	}
	if got := <-waited; got.code != 200 || got.body["terminate_reason"] != "aborted" {
		t.Errorf("A's answer to its client that waited for the run, aborted on B: %d %v", got.code, got.body)
	}
	_, types = a.sse(t, id, 0, nil)
	ends := 0
	for _, typ := range types {
		if typ == "run_end" {
			ends++
		}
	}
	if ends != 1 {
		t.Errorf("the run's events end %d times: %v", ends, types)
	}
	svc.mu.Lock()
	defer svc.mu.Unlock()
	if n := svc.deliveries[id+":2:0"]; n != 0 {
		t.Errorf("the second turn's call was sent %d times after the abort", n)
	}
}

// agentry serve --temporal starts runs on Temporal for the workers: a
// run over HTTP with ?wait=true, one that waits for approval decided
// over HTTP, and one aborted over HTTP.
func TestServeOnTemporal(t *testing.T) {
	hostPort, _ := testdb.Temporal(t)
	db := testdb.Postgres(t)
	_, url := newCounter(t)
	spec, agents := posterAgents(t, url, "effect", "effect")
	startWorker(t, "--temporal", hostPort, "--db", db, "--agents", agents, "--allow-private-network")
	s := startServe(t, "--agents", agents, "--db", db, "--temporal", hostPort, "--allow-private-network")

	code, started := s.call(t, "POST", "/v1/runs", "", `{"agent": "poster", "input": {"task": "at once"}}`)
	if code != 201 {
		t.Fatalf("run on Temporal over HTTP: %d %v\n%s", code, started, s.out)
	}
	if code, run := s.call(t, "GET", "/v1/runs/"+started["run_id"].(string), "", ""); code != 200 {
		t.Errorf("the run's id answered, the run is not in the store: %d %v", code, run)
	}
	code, res := s.call(t, "POST", "/v1/runs?wait=true", "", `{"agent": "poster", "input": {"task": "over HTTP"}}`)
	if code != 200 || res["success"] != true || res["result"] != "Both effects posted." {
		t.Fatalf("run on Temporal over HTTP: %d %v\n%s", code, res, s.out)
	}
	id := res["id"].(string)
	if _, types := s.sse(t, id, 0, nil); len(types) == 0 || types[0] != "run_start" || types[len(types)-1] != "run_end" {
		t.Errorf("events of the Temporal run: %v", types)
	}

	// An approval rule: version 2 of the agent.
	data, _ := os.ReadFile(spec)
	v2 := strings.Replace(strings.Replace(string(data), `"1.0.0"`, `"2.0.0"`, 1), `"policy": {`, `"policy": {"approval": {"tools": ["http_request"]}, `, 1)
	os.WriteFile(filepath.Join(filepath.Dir(spec), "2.0.0.json"), []byte(v2), 0o600)
	s.stop(t)
	s = startServe(t, "--agents", agents, "--db", db, "--temporal", hostPort, "--allow-private-network")

	code, res = s.call(t, "POST", "/v1/runs?wait=true", "", `{"agent": "poster@2.0.0", "input": {"task": "approved over HTTP"}}`)
	if code != 200 || res["terminate_reason"] != "awaiting_approval" {
		t.Fatalf("a run that waits: %d %v\n%s", code, res, s.out)
	}
	id = res["id"].(string)
	if code, body := s.call(t, "POST", "/v1/runs/"+id+"/resume", "", `{"approve": ["nope"]}`); code != 400 {
		t.Errorf("approving no waiting call: %d %v", code, body)
	}
	code, res = s.call(t, "POST", "/v1/runs/"+id+"/resume?wait=true", "", fmt.Sprintf(`{"approve": ["%s:1:0"]}`, id))
	if code != 200 || res["terminate_reason"] != "awaiting_approval" {
		t.Fatalf("after the first approval: %d %v", code, res)
	}
	if code, body := s.call(t, "POST", "/v1/runs/"+id+"/abort", "", ""); code != 202 {
		t.Fatalf("abort: %d %v", code, body)
	}
	run := s.waitStatus(t, id, "aborted")
	_ = run
}

// A pipeline runs on Temporal as it runs locally: the same Result JSON
// (its envelope too), each stage a run of its own, child of the
// pipeline's, every effect once.
func TestTemporalPipeline(t *testing.T) {
	hostPort, _ := testdb.Temporal(t)
	svc, url := newCounter(t)
	_, agents := posterAgents(t, url, "effect", "effect")
	dir := filepath.Dir(agents)
	def := `{"pipeline_name": "post-and-tell", "version": "v1", "agents_dir": "agents", "start": "post", "max_hops": 4,
  "stages": [
    {"name": "post", "agent": "poster@1.0.0", "output_key": "posted", "default_next": "tell"},
    {"name": "tell", "agent": {"agent_name": "teller", "version": "v1", "mode": "tools", "model_name": "scripted:teller.turns.json",
       "system_text": "You tell what was posted.", "purpose_text": "${task}", "input_keys": ["task"]},
     "output_key": "told", "default_next": "end"}]}`
	turns := `{"model": "gpt-4.1-mini", "turns": [{"content": "Two effects were posted.", "usage": {"prompt_tokens": 20, "completion_tokens": 5}}]}`
	os.WriteFile(filepath.Join(dir, "pipeline.json"), []byte(def), 0o600)
	os.WriteFile(filepath.Join(dir, "teller.turns.json"), []byte(turns), 0o600)
	db := filepath.Join(t.TempDir(), "runs.db")
	startWorker(t, "--temporal", hostPort, "--db", db, "--allow-private-network")

	code, onTemporal, errs := runCLI(t, "run", filepath.Join(dir, "pipeline.json"), "--input", "task=post twice", "--temporal", hostPort, "--db", db, "--json", "-q")
	if code != 0 {
		t.Fatalf("run PIPELINE --temporal: exit %d: %s%s", code, onTemporal, errs)
	}
	code, local, errs := runCLI(t, "run", filepath.Join(dir, "pipeline.json"), "--input", "task=post twice", "--db", filepath.Join(t.TempDir(), "local.db"),
		"--json", "-q", "--allow-private-network")
	if code != 0 {
		t.Fatalf("local pipeline: exit %d: %s", code, errs)
	}
	sameResult(t, onTemporal, local)
	var res struct {
		ID string `json:"id"`
	}
	json.Unmarshal([]byte(onTemporal), &res)
	code, out, _ := runCLI(t, "runs", "--db", db, "--parent", res.ID)
	if code != 0 || strings.Count(out, "completed") != 2 || !strings.Contains(out, "poster@1.0.0") || !strings.Contains(out, "teller@v1") {
		t.Errorf("the stages' runs, children of the pipeline's: %s", out)
	}
	if code, out, errs := runCLI(t, "trace", res.ID, "--db", db); code != 0 || !strings.Contains(out, "stage run") ||
		!strings.Contains(out, "poster@1.0.0  completed") || !strings.Contains(out, "teller@v1  completed") {
		t.Errorf("trace of the pipeline run: exit %d: %s%s", code, out, errs)
	}
	// Two POSTs by each pipeline run (on Temporal, and locally), each sent
	// once and taking effect once.
	svc.mu.Lock()
	defer svc.mu.Unlock()
	if len(svc.deliveries) != 4 {
		t.Errorf("%d keys posted; want 4", len(svc.deliveries))
	}
	for key, n := range svc.deliveries {
		if n != 1 || svc.effects[key] != 1 {
			t.Errorf("key %s sent %d times, %d effects", key, n, svc.effects[key])
		}
	}
}

// serve --temporal --max-runs 1: a run started on Temporal holds the
// server's one slot while it goes, so a second is refused (429) before
// Temporal is asked, and the slot comes back when the run ends.
func TestServeOnTemporalMaxRuns(t *testing.T) {
	hostPort, _ := testdb.Temporal(t)
	db := testdb.Postgres(t)
	svc, url := newCounter(t)
	_, agents := posterAgents(t, url, "gate", "effect")
	startWorker(t, "--temporal", hostPort, "--db", db, "--agents", agents, "--allow-private-network")
	s := startServe(t, "--agents", agents, "--db", db, "--temporal", hostPort, "--allow-private-network", "--max-runs", "1")
	code, started := s.call(t, "POST", "/v1/runs", "", `{"agent": "poster", "input": {"task": "held at the gate"}}`)
	if code != 201 {
		t.Fatalf("a run on Temporal: %d %v\n%s", code, started, s.out)
	}
	select {
	case <-svc.gated:
	case <-time.After(3 * time.Minute):
		t.Fatalf("the run never reached the gate\n%s", s.out)
	}
	if code, body := s.call(t, "POST", "/v1/runs", "", `{"agent": "poster", "input": {"task": "one too many"}}`); code != 429 {
		t.Errorf("a second run past --max-runs 1: %d %v", code, body)
	}
	svc.open()
	s.waitStatus(t, started["run_id"].(string), "completed")
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(100 * time.Millisecond) {
		code, body := s.call(t, "POST", "/v1/runs", "", `{"agent": "poster", "input": {"task": "after"}}`)
		if code == 201 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the slot never came back: %d %v", code, body)
		}
	}
}

// Two servers over one store and one Temporal: an abort sent to B ends
// aborted both a run A started on Temporal and one A drives itself (a
// chat completion), and A answers each as B does, as the store records
// it: one store, one answer.
func TestServeOnTemporalAbortedElsewhere(t *testing.T) {
	hostPort, _ := testdb.Temporal(t)
	db := testdb.Postgres(t)
	svc, url := newCounter(t)
	_, agents := posterAgents(t, url, "gate", "effect")
	startWorker(t, "--temporal", hostPort, "--db", db, "--agents", agents, "--allow-private-network")
	a := startServe(t, "--agents", agents, "--db", db, "--temporal", hostPort, "--allow-private-network")
	b := startServe(t, "--agents", agents, "--db", db, "--temporal", hostPort, "--allow-private-network")
	for _, c := range []struct {
		name, path, body string
		key, want        string // of A's answer
		last             bool   // the gate opens after its abort
	}{
		{"on Temporal", "/v1/runs?wait=true", `{"agent": "poster", "input": {"task": "held at the gate"}}`, "terminate_reason", "aborted", false},
		// Before, A answered a store error: its lease was lost.
		{"driven by A", "/v1/chat/completions", `{"model": "poster", "messages": [{"role": "user", "content": "held at the gate"}]}`, "object", "chat.completion", true},
	} {
		t.Run(c.name, func(t *testing.T) {
			waited := a.waiting(t, c.path, c.body)
			id := gatedRun(t, svc, b)
			if code, body := b.call(t, "POST", "/v1/runs/"+id+"/abort", "", ""); code != 202 {
				t.Fatalf("abort on B: %d %v\n%s", code, body, b.out)
			}
			b.waitStatus(t, id, "aborted")
			if c.last {
				svc.open() // A's call at the gate returns: A writes nothing of it
			}
			got := <-waited
			if got.code != 200 || got.body[c.key] != c.want {
				t.Errorf("A's answer to the run it started, aborted on B: %d %v", got.code, got.body)
			}
			for _, s := range []*served{a, b} {
				code, run := s.call(t, "GET", "/v1/runs/"+id, "", "")
				res, _ := run["result"].(map[string]any)
				if code != 200 || run["status"] != "aborted" || res["terminate_reason"] != "aborted" {
					t.Errorf("the run as %s reports it: %d %v", s.base, code, run)
				}
			}
			_, types := a.sse(t, id, 0, nil)
			if n := strings.Count(strings.Join(types, " "), "run_end"); n != 1 {
				t.Errorf("A's events of the run end %d times: %v", n, types)
			}
		})
	}
}

// answer is a server's answer to a call.
type answer struct {
	code int
	body map[string]any
}

// waiting POSTs body to path in the background: a client that waits
// for its answer.
func (s *served) waiting(t *testing.T, path, body string) <-chan answer {
	waited := make(chan answer, 1)
	go func() {
		code, body := s.call(t, "POST", path, "", body)
		waited <- answer{code, body}
	}()
	return waited
}

// gatedRun waits until a run's call reached svc's gate, and returns the
// id of the one run s lists running.
func gatedRun(t *testing.T, svc *counter, s *served) string {
	t.Helper()
	select {
	case <-svc.gated:
	case <-time.After(3 * time.Minute):
		t.Fatalf("no run's call reached the gate\n%s", s.out)
	}
	code, list := s.call(t, "GET", "/v1/runs?status=running", "", "")
	runs, _ := list["runs"].([]any)
	if code != 200 || len(runs) != 1 {
		t.Fatalf("the one running run, listed: %d %v", code, list)
	}
	return runs[0].(map[string]any)["run_id"].(string)
}

// TestServeOnTemporalCreationRules: a runner's inline spec on Temporal
// pauses for approval; deciding it is creating it again, so a server
// whose rules let runners create it decides it, and one whose rules do
// not (the default: only an admin) refuses the same runner with 403.
func TestServeOnTemporalCreationRules(t *testing.T) {
	hostPort, _ := testdb.Temporal(t)
	db := testdb.Postgres(t)
	_, url := newCounter(t)
	specPath, agents := posterAgents(t, url, "effect", "effect")
	turns, _ := filepath.Abs(filepath.Join(filepath.Dir(specPath), "../../poster.turns.json"))
	data, _ := os.ReadFile(specPath)
	inline := strings.Replace(strings.Replace(string(data), "scripted:../../poster.turns.json", "scripted:"+turns, 1),
		`"policy": {`, `"policy": {"approval": {"tools": ["http_request"]}, `, 1)
	inline = strings.Replace(inline, `"agent_name": "poster"`, `"agent_name": "inline-poster"`, 1)
	keys := filepath.Join(t.TempDir(), "keys.json")
	os.WriteFile(keys, []byte(`[{"name": "rui", "sha256": "`+hashOf("r-key")+`", "role": "runner"}]`), 0o600)
	common := []string{"--agents", agents, "--db", db, "--temporal", hostPort, "--allow-private-network", "--auth-keys", keys, "--models", "scripted:" + turns}
	startWorker(t, "--temporal", hostPort, "--db", db, "--agents", agents, "--allow-private-network")
	lets := startServe(t, append(common, "--create", "agent:*=runner", "--create", "tool:http_request=runner")...)
	strict := startServe(t, common...)

	code, res := lets.call(t, "POST", "/v1/runs?wait=true", "r-key", `{"spec": `+inline+`, "input": {"task": "inline"}}`)
	if code != 200 || res["terminate_reason"] != "awaiting_approval" {
		t.Fatalf("the runner's inline run: %d %v\n%s", code, res, lets.out)
	}
	id := res["id"].(string)
	approve := fmt.Sprintf(`{"approve": ["%s:1:0"]}`, id)
	code, body := strict.call(t, "POST", "/v1/runs/"+id+"/resume", "r-key", approve)
	if e, _ := body["error"].(map[string]any); code != 403 || !strings.Contains(fmt.Sprint(e["message"]), "may not create agent:inline-poster") {
		t.Errorf("decided where the rules do not let the runner create it: %d %v", code, body)
	}
	if code, res := lets.call(t, "POST", "/v1/runs/"+id+"/resume?wait=true", "r-key", approve); code != 200 || res["terminate_reason"] != "awaiting_approval" {
		t.Errorf("decided where they do: %d %v", code, res)
	}
}

// TestServeOnTemporalConversation: a conversation's runs go on the
// workers, and each reads the conversation's history from the store as
// a local run does: the second run's model is sent the first exchange.
func TestServeOnTemporalConversation(t *testing.T) {
	hostPort, _ := testdb.Temporal(t)
	db := testdb.Postgres(t)
	base := t.TempDir()
	agents := filepath.Join(base, "agents")
	os.MkdirAll(filepath.Join(agents, "chat"), 0o755)
	os.WriteFile(filepath.Join(agents, "chat", "v1.json"), []byte(`{"agent_name": "chat", "version": "v1", "model_name": "scripted:../../turns.json",
		"system_text": "Chat.", "user_text": "${message}", "input_keys": ["message"]}`), 0o600)
	os.WriteFile(filepath.Join(base, "turns.json"), []byte(`{"turns": [{"content": "Hello, Ada!"}, {"content": "You are Ada."}]}`), 0o600)
	startWorker(t, "--temporal", hostPort, "--db", db, "--agents", agents)
	s := startServe(t, "--agents", agents, "--db", db, "--temporal", hostPort)
	code, conv := s.call(t, "POST", "/v1/conversations", "", `{"agent": "chat"}`)
	if code != 201 {
		t.Fatalf("create: %d %v\n%s", code, conv, s.out)
	}
	path := "/v1/conversations/" + conv["id"].(string) + "/messages?wait=true"
	if code, res := s.call(t, "POST", path, "", `{"message": "My name is Ada."}`); code != 200 || res["result"] != "Hello, Ada!" {
		t.Fatalf("the first message: %d %v\n%s", code, res, s.out)
	}
	code, res := s.call(t, "POST", path, "", `{"message": "Who am I?"}`)
	msgs, _ := res["messages"].([]any)
	if code != 200 || res["result"] != "You are Ada." || len(msgs) != 5 || msgs[1].(map[string]any)["content"] != "My name is Ada." {
		t.Errorf("the second message, on a worker: %d %v", code, res)
	}
}

// TestServeOnTemporalConversationBusy: a message whose run is started on
// Temporal holds its conversation before any worker has begun it: a
// second message is refused (409) naming it, not started beside it.
func TestServeOnTemporalConversationBusy(t *testing.T) {
	hostPort, _ := testdb.Temporal(t)
	db := testdb.Postgres(t)
	base := t.TempDir()
	agents := filepath.Join(base, "agents")
	os.MkdirAll(filepath.Join(agents, "chat"), 0o755)
	os.WriteFile(filepath.Join(agents, "chat", "v1.json"), []byte(`{"agent_name": "chat", "version": "v1", "model_name": "scripted:../../turns.json",
		"system_text": "Chat.", "user_text": "${message}", "input_keys": ["message"]}`), 0o600)
	os.WriteFile(filepath.Join(base, "turns.json"), []byte(`{"turns": [{"content": "Hello, Ada!"}, {"content": "You are Ada."}]}`), 0o600)
	s := startServe(t, "--agents", agents, "--db", db, "--temporal", hostPort)
	_, conv := s.call(t, "POST", "/v1/conversations", "", `{"agent": "chat"}`)
	path := "/v1/conversations/" + conv["id"].(string) + "/messages"
	code, first := s.call(t, "POST", path, "", `{"message": "My name is Ada."}`) // no worker yet: answered once the wait for one runs out
	if code != 201 {
		t.Fatalf("the first message: %d %v\n%s", code, first, s.out)
	}
	id := first["run_id"].(string)
	code, body := s.call(t, "POST", path, "", `{"message": "Who am I?"}`)
	if e, _ := body["error"].(map[string]any); code != 409 || !strings.Contains(fmt.Sprint(e["message"]), id) {
		t.Fatalf("the second message while the first waits for a worker: %d %v", code, body)
	}
	startWorker(t, "--temporal", hostPort, "--db", db, "--agents", agents)
	s.waitStatus(t, id, "completed")
	code, res := s.call(t, "POST", path+"?wait=true", "", `{"message": "Who am I?"}`)
	if code != 200 || res["result"] != "You are Ada." {
		t.Errorf("the second message once the first ended: %d %v", code, res)
	}
}
