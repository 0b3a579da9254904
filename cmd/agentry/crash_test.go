package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentry/agentry/internal/testdb"
)

// payments is a payment service on loopback. The first request blocks,
// as a slow service does, until the test is done with it; a service that
// deduplicates takes one effect per Idempotency-Key.
type payments struct {
	mu      sync.Mutex
	keys    []string // the key of each request, in order
	arrived chan struct{}
	release chan struct{}
	srv     *httptest.Server
}

func newPayments(t *testing.T) *payments {
	p := &payments{arrived: make(chan struct{}, 16), release: make(chan struct{})}
	p.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.ReadAll(r.Body)
		p.mu.Lock()
		p.keys = append(p.keys, r.Header.Get("Idempotency-Key"))
		first := len(p.keys) == 1
		p.mu.Unlock()
		p.arrived <- struct{}{}
		if first {
			select { // in flight until the client dies
			case <-p.release:
			case <-r.Context().Done():
			}
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.Write([]byte(`{"paid": 5}`))
	}))
	t.Cleanup(func() { close(p.release); p.srv.Close() })
	return p
}

func (p *payments) sent() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]string(nil), p.keys...)
}

// payerDir writes an agent whose second turn calls payTool on the
// payment service; extra are more fields of its spec.
func payerDir(t *testing.T, payTool, payArgs, extra string) string {
	dir := t.TempDir()
	spec := `{"agent_name": "payer", "version": "1.0.0", "model_name": "scripted:turns.json", ` + extra + `
		"system_text": "You pay invoices.", "tools": ["kv_set", "` + payTool + `"], "limits": {"max_turns": 5}}`
	turns := `{"model": "gpt-4.1-mini", "turns": [
		{"tool_calls": [{"name": "kv_set", "arguments": {"key": "invoice", "value": 5}}], "usage": {"prompt_tokens": 40, "completion_tokens": 9}},
		{"tool_calls": [{"name": "` + payTool + `", "arguments": ` + payArgs + `}], "usage": {"prompt_tokens": 60, "completion_tokens": 12}},
		{"content": "Paid the invoice.", "usage": {"prompt_tokens": 80, "completion_tokens": 5}}]}`
	for name, body := range map[string]string{"payer.json": spec, "turns.json": turns} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return filepath.Join(dir, "payer.json")
}

// runUntilKilled starts agentry run, waits for its payment request to
// reach the service, and kills it with SIGKILL while the request is in
// flight. It returns the id of the run it left.
func runUntilKilled(t *testing.T, p *payments, spec, db string) string {
	cmd := exec.Command(binary(t), "run", spec, "--db", db, "--allow-private-network", "-q", "--json")
	var errs bytes.Buffer
	cmd.Stderr = &errs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	select {
	case <-p.arrived:
	case <-time.After(30 * time.Second):
		cmd.Process.Kill()
		cmd.Wait()
		t.Fatalf("the payment never arrived\n%s", errs.String())
	}
	// While the run is alive, nobody else may drive it.
	id, status := onlyRun(t, db)
	if status != "running" {
		t.Errorf("the run in flight is %s, want running", status)
	}
	code, _, errOut := runCLI(t, "resume", id, "--db", db)
	if code != 1 || !strings.Contains(errOut, "is held by") {
		t.Errorf("resume of a live run: exit %d, %s; want 1 and who holds it", code, errOut)
	}
	if err := cmd.Process.Kill(); err != nil { // SIGKILL
		t.Fatal(err)
	}
	if err := cmd.Wait(); err == nil || !strings.Contains(err.Error(), "killed") {
		t.Fatalf("agentry run was not killed: %v", err)
	}
	if _, status := onlyRun(t, db); status != "interrupted" {
		t.Errorf("the killed run is %s, want interrupted", status)
	}
	return id
}

// onlyRun returns the id and status of the one run of db.
func onlyRun(t *testing.T, db string) (string, string) {
	t.Helper()
	code, out, errOut := runCLI(t, "runs", "--db", db, "--json")
	var runs []struct {
		ID     string `json:"run_id"`
		Status string
	}
	if code != 0 || json.Unmarshal([]byte(out), &runs) != nil || len(runs) != 1 {
		t.Fatalf("runs: exit %d\n%s\n%s", code, out, errOut)
	}
	return runs[0].ID, runs[0].Status
}

// runCLI runs the built binary.
func runCLI(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	return runEnv(t, nil, args...)
}

// runEnv runs the binary with extra environment variables.
func runEnv(t *testing.T, env []string, args ...string) (int, string, string) {
	t.Helper()
	return runProc(t, env, nil, args...)
}

// runStdin runs the binary with stdin.
func runStdin(t *testing.T, stdin string, args ...string) (int, string, string) {
	t.Helper()
	return runProc(t, nil, strings.NewReader(stdin), args...)
}

// runProc runs the binary with extra environment variables and stdin.
func runProc(t *testing.T, env []string, stdin io.Reader, args ...string) (int, string, string) {
	t.Helper()
	cmd := exec.Command(binary(t), args...)
	cmd.Env = append(os.Environ(), env...)
	cmd.Stdin = stdin
	var out, errs bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errs
	code := 0
	if err := cmd.Run(); err != nil {
		ee, ok := err.(*exec.ExitError)
		if !ok {
			t.Fatal(err)
		}
		code = ee.ExitCode()
	}
	return code, out.String(), errs.String()
}

type tracedRun struct {
	ID         string `json:"id"`
	Success    bool   `json:"success"`
	Result     any    `json:"result"`
	Iterations int    `json:"iterations"`
	Steps      []struct {
		Turn        int    `json:"turn"`
		Observation string `json:"observation"`
		Action      struct {
			Tool string `json:"tool"`
		} `json:"action"`
	} `json:"steps"`
	ModelCalls []struct {
		Turn int `json:"turn"`
	} `json:"model_calls"`
	Events []struct {
		Type string `json:"type"`
		Turn int    `json:"turn"`
	} `json:"events"`
}

// TestCrashThroughTheBinary kills agentry while its POST is in flight and
// resumes it: the service is one the spec names as keeping one effect
// per Idempotency-Key, so the request is sent again with its key, the
// service takes the payment once, and the run completes with every turn
// traced once.
func TestCrashThroughTheBinary(t *testing.T) {
	for _, backend := range []struct {
		name string
		db   func(testing.TB) string
	}{{"sqlite", testdb.SQLite}, {"postgres", testdb.Postgres}} {
		t.Run(backend.name, func(t *testing.T) {
			p := newPayments(t)
			db := backend.db(t)
			spec := payerDir(t, "http_request", `{"method": "POST", "url": "`+p.srv.URL+`/pay", "json": {"amount": 5}}`,
				`"policy": {"network": {"idempotency_key_hosts": ["127.0.0.1"]}},`)
			id := runUntilKilled(t, p, spec, db)

			code, out, errs := runCLI(t, "resume", id, "--db", db, "--allow-private-network", "--json")
			if code != 0 {
				t.Fatalf("resume: exit %d\n%s\n%s", code, errs, out)
			}
			var res tracedRun
			if err := json.Unmarshal([]byte(out), &res); err != nil || !res.Success || res.Result != "Paid the invoice." || res.ID != id {
				t.Fatalf("resumed result: %v\n%s", err, out)
			}
			keys := p.sent()
			if len(keys) != 2 || keys[0] != id+":2:0" || keys[1] != keys[0] {
				t.Errorf("the service saw keys %v; want the request twice with one key, %s:2:0", keys, id)
			}
			code, out, _ = runCLI(t, "trace", id, "--db", db, "--json")
			var tr tracedRun
			if code != 0 || json.Unmarshal([]byte(out), &tr) != nil {
				t.Fatalf("trace: exit %d\n%s", code, out)
			}
			turns := fmt.Sprint(len(tr.ModelCalls), len(tr.Steps))
			if turns != "3 2" || tr.ModelCalls[0].Turn != 1 || tr.ModelCalls[1].Turn != 2 || tr.ModelCalls[2].Turn != 3 {
				t.Errorf("trace holds %s model calls and steps, want each of 3 turns once: %+v", turns, tr.ModelCalls)
			}
			starts := map[int]int{}
			for _, e := range tr.Events {
				if e.Type == "turn_start" {
					starts[e.Turn]++
				}
			}
			if starts[1] != 1 || starts[2] != 1 || starts[3] != 1 {
				t.Errorf("turn_start events per turn: %v, want one each\n%s", starts, out)
			}
			code, text, _ := runCLI(t, "trace", id, "--db", db)
			if code != 0 || strings.Count(text, "\nturn 2\n") != 1 || !strings.Contains(text, "— resumed here —") {
				t.Errorf("trace text:\n%s", text)
			}
		})
	}
}

// A POST in flight to a service the spec does not name as keeping one
// effect per Idempotency-Key is not sent again by the resume: the run
// pauses naming it, and --approve with its key sends it again.
func TestCrashHTTPToAServiceThatIgnoresTheKey(t *testing.T) {
	p := newPayments(t)
	db := testdb.SQLite(t)
	spec := payerDir(t, "http_request", `{"method": "POST", "url": "`+p.srv.URL+`/pay", "json": {"amount": 5}}`, "")
	id := runUntilKilled(t, p, spec, db)
	code, _, errs := runCLI(t, "resume", id, "--db", db, "--allow-private-network")
	if code != 3 || !strings.Contains(errs, "waits for approval") || len(p.sent()) != 1 {
		t.Fatalf("resume: exit %d, the service saw %v\n%s", code, p.sent(), errs)
	}
	code, _, errs = runCLI(t, "resume", id, "--db", db, "--allow-private-network", "--approve", id+":2:0")
	if keys := p.sent(); code != 0 || len(keys) != 2 || keys[1] != id+":2:0" {
		t.Errorf("approved: exit %d, the service saw %v\n%s", code, keys, errs)
	}
}

// TestCrashWithoutDeduplication: a payment tool that does not deduplicate
// is never sent twice blindly. The resumed run pauses naming the call,
// and --deny lets it finish with the outcome unknown.
func TestCrashWithoutDeduplication(t *testing.T) {
	p := newPayments(t)
	db := testdb.SQLite(t)
	spec := payerDir(t, "charge", `{"url": "`+p.srv.URL+`/pay", "amount": 5}`, "")
	id := runUntilKilled(t, p, spec, db)

	code, out, errs := runCLI(t, "resume", id, "--db", db, "--allow-private-network")
	if code != 3 || !strings.Contains(errs, "waits for approval") || !strings.Contains(errs, "call_2_1") ||
		!strings.Contains(out, "agentry resume "+id+" --db "+db+" --deny "+id+":2:0") {
		t.Fatalf("resume: exit %d; want 3, the call named and how to decide it\n%s\n%s", code, errs, out)
	}
	code, out, _ = runCLI(t, "runs", "--db", db, "--status", "awaiting_approval", "--json")
	if code != 0 || !strings.Contains(out, id) {
		t.Errorf("runs --status awaiting_approval:\n%s", out)
	}
	code, out, errs = runCLI(t, "resume", id, "--db", db, "--allow-private-network", "--deny", "call_2_1", "--json")
	if code != 0 {
		t.Fatalf("resume --deny: exit %d\n%s\n%s", code, errs, out)
	}
	var res tracedRun
	if err := json.Unmarshal([]byte(out), &res); err != nil || !res.Success || len(res.Steps) != 2 {
		t.Fatalf("result after --deny: %v\n%s", err, out)
	}
	if pay := res.Steps[1]; pay.Action.Tool != "charge" || !strings.Contains(pay.Observation, "unknown_outcome") {
		t.Errorf("the denied call's step: %+v; want an unknown_outcome observation", pay)
	}
	if n := len(p.sent()); n != 1 {
		t.Errorf("the service saw %d requests, want 1: a denied call is not sent again", n)
	}
}
