package main

import (
	"bufio"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// payee is a payment service: it takes an effect on the first request of
// each Idempotency-Key and keeps one effect per key, as a service that
// deduplicates does. The first request it holds open until the test
// lets it go (or the caller goes away), so that the caller dies with the
// effect taken and its answer not received.
type payee struct {
	mu       sync.Mutex
	requests []string       // the Idempotency-Key of each request
	effects  map[string]int // per key
	arrived  chan struct{}  // closed at the first request
	hold     chan struct{}  // closed to answer held requests
}

func newPayee() *payee {
	return &payee{effects: map[string]int{}, arrived: make(chan struct{}), hold: make(chan struct{})}
}

func (p *payee) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	key := r.Header.Get("Idempotency-Key")
	p.mu.Lock()
	p.requests = append(p.requests, key)
	first := len(p.requests) == 1
	if p.effects[key] == 0 {
		p.effects[key] = 1 // the effect is taken once per key
	}
	p.mu.Unlock()
	if first {
		close(p.arrived)
		select {
		case <-p.hold:
		case <-r.Context().Done():
			return // the caller died: its effect is taken, its answer lost
		}
	}
	w.Header().Set("Content-Type", "application/json")
	w.Write([]byte(`{"paid": true}`))
}

// sse reads a run's event stream from after last until the stream ends
// or stop says so, and returns the ids and types it read.
func (s *served) sse(t *testing.T, id string, last int64, stop func(typ string) bool) (ids []int64, types []string) {
	t.Helper()
	req, _ := http.NewRequest("GET", s.base+"/v1/runs/"+id+"/events", nil)
	if last > 0 {
		req.Header.Set("Last-Event-ID", strconv.FormatInt(last, 10))
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if v, ok := strings.CutPrefix(line, "id: "); ok {
			n, _ := strconv.ParseInt(v, 10, 64)
			ids = append(ids, n)
		}
		if v, ok := strings.CutPrefix(line, "event: "); ok {
			types = append(types, v)
			if stop != nil && stop(v) {
				return ids, types
			}
		}
	}
	return ids, types
}

// status polls the run until its status is want.
func (s *served) waitStatus(t *testing.T, id, want string) map[string]any {
	t.Helper()
	for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		code, run := s.call(t, "GET", "/v1/runs/"+id, "", "")
		if code == 200 && run["status"] == want {
			return run
		}
		if time.Now().After(deadline) {
			t.Fatalf("run %s: status %v, want %s\n%s", id, run["status"], want, s.out)
		}
	}
}

// TestServeKilled: a server killed (SIGKILL) while a run's payment is in
// flight leaves the run to the next server, which resumes it with
// --resume-interrupted: the payment, whose outcome nobody knows, waits
// for a person; approved over HTTP, it is sent again with the same
// Idempotency-Key, so the payee takes its effect once. A client that
// watched the run's events before the kill resumes its stream on the
// new server by Last-Event-ID while the run goes on, and reads every
// event once.
func TestServeKilled(t *testing.T) {
	pay := newPayee()
	api := httptest.NewServer(pay)
	defer api.Close()
	defer close(pay.hold)
	dir := t.TempDir()
	os.MkdirAll(filepath.Join(dir, "agents", "payer"), 0o755)
	os.WriteFile(filepath.Join(dir, "agents", "payer", "v1.json"), []byte(`{"agent_name": "payer", "version": "v1",
		"model_name": "scripted:../../replies/payer.json", "mode": "tools", "system_text": "Pay the invoice.", "tools": ["http_request"]}`), 0o600)
	os.MkdirAll(filepath.Join(dir, "replies"), 0o755)
	os.WriteFile(filepath.Join(dir, "replies", "payer.json"), []byte(`{"turns": [
		{"content": "Paying.", "tool_calls": [{"name": "http_request", "arguments": {"method": "POST", "url": "`+api.URL+`/pay", "json": {"amount": 42}}}]},
		{"content": "Paid 42."}]}`), 0o600)
	db := filepath.Join(dir, "runs.db")
	args := []string{"--agents", filepath.Join(dir, "agents"), "--db", db, "--allow-private-network"}

	s := startServe(t, args...)
	code, created := s.call(t, "POST", "/v1/runs", "", `{"agent": "payer", "input": {"task": "pay"}}`)
	if code != 201 {
		t.Fatalf("%d %v\n%s", code, created, s.out)
	}
	id := created["run_id"].(string)
	select {
	case <-pay.arrived:
	case <-time.After(60 * time.Second):
		t.Fatalf("the payment never arrived\n%s", s.out)
	}
	// A client reads the stream up to the call in flight.
	seen, types := s.sse(t, id, 0, func(typ string) bool { return typ == "tool_call_start" })
	if len(seen) == 0 || types[len(types)-1] != "tool_call_start" {
		t.Fatalf("events before the kill: %v", types)
	}
	s.cmd.Process.Kill()
	s.cmd.Wait()

	s = startServe(t, append(args, "--resume-interrupted")...)
	run := s.waitStatus(t, id, "awaiting_approval")
	var waiting string
	if res, ok := run["result"].(map[string]any); ok {
		if calls, _ := res["waiting"].([]any); len(calls) == 1 {
			waiting, _ = calls[0].(map[string]any)["call_id"].(string)
		}
	}
	if waiting == "" {
		t.Fatalf("the resumed run waits on no call: %v", run)
	}
	// The client resumes its stream where it left off, on the new server:
	// it reads to the pause's end, and after the approval (the run goes
	// on) from there to the end.
	paused, pausedTypes := s.sse(t, id, seen[len(seen)-1], nil)
	if len(paused) == 0 || pausedTypes[len(pausedTypes)-1] != "run_end" {
		t.Fatalf("the stream to the pause: %v", pausedTypes)
	}
	if code, body := s.call(t, "POST", "/v1/runs/"+id+"/resume", "", `{"approve": ["`+waiting+`"]}`); code != 202 {
		t.Fatalf("approve: %d %v", code, body)
	}
	rest, restTypes := s.sse(t, id, paused[len(paused)-1], nil)
	rest = append(paused, rest...)
	final := s.waitStatus(t, id, "completed")
	if res, _ := final["result"].(map[string]any); res == nil || res["result"] != "Paid 42." {
		t.Errorf("the run's result: %v", final["result"])
	}
	// What the client read in two pieces is the whole stream, read again.
	all := append(append([]int64{}, seen...), rest...)
	whole, _ := s.sse(t, id, 0, nil)
	if fmt.Sprint(all) != fmt.Sprint(whole) {
		t.Errorf("read across the kill %v, the whole stream %v", all, whole)
	}
	if len(restTypes) == 0 || restTypes[len(restTypes)-1] != "run_end" {
		t.Errorf("the resumed stream %v does not end with run_end", restTypes)
	}
	// The person's decision is on the audit log as theirs.
	_, audit := s.call(t, "GET", "/v1/runs/"+id+"/audit", "", "")
	var decided []string
	for _, r := range audit["records"].([]any) {
		if rec := r.(map[string]any); rec["rule"] == "unknown_outcome" {
			decided = append(decided, fmt.Sprint(rec["decision"], " ", rec["target"], " by ", rec["user_id"]))
		}
	}
	if len(decided) != 1 || decided[0] != "approve tool:http_request by anonymous" {
		t.Errorf("decisions on the unknown outcome on record: %q", decided)
	}
	pay.mu.Lock()
	defer pay.mu.Unlock()
	if len(pay.effects) != 1 || len(pay.requests) != 2 || pay.requests[0] != pay.requests[1] || pay.requests[0] == "" {
		t.Errorf("the payee saw requests %q and took effects %v: want one effect, the second request under the first's key", pay.requests, pay.effects)
	}
	s.stop(t)
}

// TestServeStopped: SIGTERM while a run waits on its model lets the run
// go on for --shutdown-timeout, then interrupts it (resumable, not
// aborted) and exits cleanly; the next server finishes it with
// --resume-interrupted. While the run goes, --max-runs 1 turns a second
// run away with 429.
func TestServeStopped(t *testing.T) {
	dir := t.TempDir()
	os.MkdirAll(filepath.Join(dir, "agents", "slow"), 0o755)
	os.MkdirAll(filepath.Join(dir, "replies"), 0o755)
	os.WriteFile(filepath.Join(dir, "agents", "slow", "v1.json"), []byte(`{"agent_name": "slow", "version": "v1",
		"model_name": "scripted:../../replies/slow.json", "mode": "tools", "system_text": "Work.", "tools": ["kv_set"]}`), 0o600)
	os.WriteFile(filepath.Join(dir, "replies", "slow.json"), []byte(`{"turns": [
		{"content": "Noting.", "tool_calls": [{"name": "kv_set", "arguments": {"key": "k", "value": "v"}}]},
		{"content": "Done.", "delay_ms": 3000}]}`), 0o600)
	db := filepath.Join(dir, "runs.db")
	args := []string{"--agents", filepath.Join(dir, "agents"), "--db", db, "--max-runs", "1"}

	s := startServe(t, append(args, "--shutdown-timeout", "200ms")...)
	code, created := s.call(t, "POST", "/v1/runs", "", `{"agent": "slow", "input": {"task": "work"}}`)
	if code != 201 {
		t.Fatalf("%d %v\n%s", code, created, s.out)
	}
	id := created["run_id"].(string)
	turns := 0
	s.sse(t, id, 0, func(typ string) bool {
		if typ == "turn_start" {
			turns++
		}
		return turns == 2 // the second turn waits on its model
	})
	// The turn's events reached the store while its model works.
	if _, now := s.call(t, "GET", "/v1/runs/"+id, "", ""); now["status"] != "running" {
		t.Fatalf("the run is %v before its slow turn ended", now["status"])
	}
	if code, body := s.call(t, "POST", "/v1/runs", "", `{"agent": "slow", "input": {"task": "more"}}`); code != 429 {
		t.Errorf("a second run past --max-runs 1: %d %v", code, body)
	}
	s.stop(t)
	if !strings.Contains(s.out.String(), "stopping") {
		t.Errorf("the server did not say it stops:\n%s", s.out)
	}
	s = startServe(t, args...)
	s.waitStatus(t, id, "interrupted")
	s.stop(t)

	s = startServe(t, append(args, "--resume-interrupted")...)
	final := s.waitStatus(t, id, "completed")
	if res, _ := final["result"].(map[string]any); res == nil || res["result"] != "Done." {
		t.Errorf("the resumed run's result: %v", final["result"])
	}
	_, types := s.sse(t, id, 0, nil)
	ends := 0
	for _, typ := range types {
		if typ == "run_end" {
			ends++
		}
	}
	if ends != 1 {
		t.Errorf("the run's stream holds %d run_end events: %v", ends, types)
	}
	s.stop(t)
}
