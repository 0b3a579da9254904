package main

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync/atomic"
	"testing"
)

// trace --json prints what run --json printed, byte for byte, with the
// events added.
func TestTraceJSONIsRunJSON(t *testing.T) {
	db := filepath.Join(t.TempDir(), "runs.db")
	code, ran, errs := run(t, "run", quickstart, "--input", "city=Lisbon", "--input", "days=3", "--db", db, "--json", "-q")
	if code != 0 {
		t.Fatalf("run: exit %d\n%s", code, errs)
	}
	var res struct {
		ID string `json:"id"`
	}
	json.Unmarshal([]byte(ran), &res)
	code, traced, errs := run(t, "trace", res.ID, "--db", db, "--json")
	if code != 0 {
		t.Fatalf("trace: exit %d\n%s", code, errs)
	}
	// Everything up to the last field is the same bytes.
	head := strings.TrimSuffix(strings.TrimSpace(ran), "}")
	if !strings.HasPrefix(traced, strings.TrimRight(head, "\n ")) {
		t.Errorf("trace --json does not begin with run --json:\n%s\n---\n%s", ran, traced)
	}
	var a, b map[string]any
	json.Unmarshal([]byte(ran), &a)
	json.Unmarshal([]byte(traced), &b)
	events, _ := b["events"].([]any)
	delete(b, "events")
	if !reflect.DeepEqual(a, b) {
		t.Error("trace --json without its events differs from run --json")
	}
	if len(events) < 10 {
		t.Errorf("trace --json has %d events", len(events))
	}
	code, text, _ := run(t, "trace", res.ID, "--db", db)
	for _, want := range []string{"run " + res.ID, "quickstart@v1", "completed", "turn 4", "→ kv_set", "completed after 4 turns"} {
		if !strings.Contains(text, want) {
			t.Errorf("trace lacks %q:\n%s", want, text)
		}
	}
	code, _, errs = run(t, "trace", "run_missing", "--db", db)
	if code != 2 || !strings.Contains(errs, "run not found") {
		t.Errorf("trace of an unknown run: exit %d %s", code, errs)
	}
}

// replay of a stored run is identical; replay --tools live against a
// service whose answer changed names the step that differs.
func TestReplayThroughTheCLI(t *testing.T) {
	var version atomic.Value
	version.Store("1.2.0")
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.Write([]byte(`{"release": "` + version.Load().(string) + `"}`))
	}))
	defer srv.Close()
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "agent.json"), []byte(`{"agent_name": "checker", "version": "v1",
		"model_name": "scripted:turns.json", "system_text": "Check the release.", "tools": ["http_get"]}`), 0o600)
	os.WriteFile(filepath.Join(dir, "turns.json"), []byte(`{"turns": [
		{"tool_calls": [{"name": "http_get", "arguments": {"url": "`+srv.URL+`/release"}}]},
		{"content": "The release is out."}]}`), 0o600)
	db := filepath.Join(dir, "runs.db")
	code, out, errs := run(t, "run", filepath.Join(dir, "agent.json"), "--db", db, "--allow-private-network", "--json", "-q")
	if code != 0 {
		t.Fatalf("run: exit %d\n%s", code, errs)
	}
	var res struct {
		ID string `json:"id"`
	}
	json.Unmarshal([]byte(out), &res)
	for _, tools := range []string{"recorded", "live"} {
		code, out, errs = run(t, "replay", res.ID, "--db", db, "--tools", tools, "--allow-private-network")
		if code != 0 || !strings.Contains(out, "identical (2 turns, 1 tool calls)") {
			t.Errorf("replay --tools %s: exit %d\n%s%s", tools, code, out, errs)
		}
	}
	version.Store("1.3.0")
	code, out, _ = run(t, "replay", res.ID, "--db", db, "--allow-private-network")
	if code != 0 {
		t.Errorf("replay with recorded tools saw the service change: exit %d\n%s", code, out)
	}
	code, out, _ = run(t, "replay", res.ID, "--db", db, "--tools", "live", "--allow-private-network")
	if code != 1 || !strings.Contains(out, "turn 1, call 1 (http_get): the tool's result differs") || !strings.Contains(out, "1.3.0") {
		t.Errorf("replay --tools live of a changed service: exit %d\n%s", code, out)
	}
	code, out, _ = run(t, "replay", res.ID, "--db", db, "--tools", "live", "--allow-private-network", "--json")
	var rep struct {
		Identical   bool `json:"identical"`
		Differences []struct {
			Turn int    `json:"turn"`
			Tool string `json:"tool"`
		} `json:"differences"`
	}
	if json.Unmarshal([]byte(out), &rep) != nil || rep.Identical || len(rep.Differences) == 0 || rep.Differences[0].Tool != "http_get" {
		t.Errorf("replay --json: exit %d\n%s", code, out)
	}
	if code, _, errs := run(t, "replay", res.ID, "--db", db, "--tools", "sometimes"); code != 2 || !strings.Contains(errs, "--tools") {
		t.Errorf("replay --tools sometimes: exit %d %s", code, errs)
	}
}

// runs lists and filters; prune deletes; --no-store stores nothing.
func TestRunsAndPrune(t *testing.T) {
	db := filepath.Join(t.TempDir(), "runs.db")
	for range 2 {
		if code, _, errs := run(t, "run", quickstart, "--input", "city=Lisbon", "--input", "days=3", "--db", db, "-q"); code != 0 {
			t.Fatal(errs)
		}
	}
	if code, _, errs := run(t, "run", quickstart, "--input", "city=Lisbon", "--input", "days=3", "--db", db, "-q", "--no-store"); code != 0 {
		t.Fatal(errs)
	}
	code, out, _ := run(t, "runs", "--db", db)
	if code != 0 || strings.Count(out, "quickstart@v1") != 2 || !strings.Contains(out, "completed") {
		t.Errorf("runs:\n%s", out)
	}
	code, out, _ = run(t, "runs", "--db", db, "--agent", "nobody")
	if code != 0 || !strings.Contains(out, "no runs") {
		t.Errorf("runs --agent nobody:\n%s", out)
	}
	if code, _, errs := run(t, "runs", "--db", db, "--status", "sleeping"); code != 2 || !strings.Contains(errs, "--status") {
		t.Errorf("runs --status sleeping: exit %d %s", code, errs)
	}
	code, out, _ = run(t, "runs", "prune", "--db", db, "--older-than", "30d")
	if code != 0 || !strings.Contains(out, "pruned 0 runs") {
		t.Errorf("prune 30d: exit %d %s", code, out)
	}
	code, out, _ = run(t, "runs", "prune", "--db", db, "--older-than", "0s")
	if code != 0 || !strings.Contains(out, "pruned 2 runs") {
		t.Errorf("prune 0s: exit %d %s", code, out)
	}
	if code, _, errs := run(t, "runs", "prune", "--db", db); code != 2 || !strings.Contains(errs, "--older-than") {
		t.Errorf("prune without --older-than: exit %d %s", code, errs)
	}
	// The default store is under XDG_DATA_HOME (a directory of the tests').
	t.Setenv("AGENTRY_DB", "")
	if d := defaultDB(); !strings.HasPrefix(d, os.Getenv("XDG_DATA_HOME")) || !strings.HasSuffix(d, filepath.Join("agentry", "agentry.db")) {
		t.Errorf("default store %s", d)
	}
	t.Setenv("AGENTRY_DB", db)
	if d := defaultDB(); d != db {
		t.Errorf("default store with AGENTRY_DB set: %s", d)
	}
	if got := redactDSN("postgres://bob:secret@db:5432/x"); strings.Contains(got, "secret") {
		t.Errorf("redactDSN kept the password: %s", got)
	}
}

func TestModelName(t *testing.T) {
	wd, _ := os.Getwd()
	for _, tc := range []struct{ in, want string }{
		{"scripted:turns.json", "scripted:" + filepath.Join(wd, "turns.json")},
		{"scripted:/abs/turns.json", "scripted:/abs/turns.json"},
		{"openai:gpt-4.1-mini", "openai:gpt-4.1-mini"},
		{"gpt-4.1-mini", "gpt-4.1-mini"},
	} {
		if got := modelName(tc.in); got != tc.want {
			t.Errorf("modelName(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}
