package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentry/agentry/internal/testdb"
)

// memoryAgent writes the memory example's agent with its memory's backend
// set (none: the run store's).
func memoryAgent(t *testing.T, backend string) string {
	t.Helper()
	data, err := os.ReadFile("../../examples/memory/agent.json")
	if err != nil {
		t.Fatal(err)
	}
	var sp map[string]any
	json.Unmarshal(data, &sp)
	if backend != "" {
		sp["memory"].(map[string]any)["backend"] = backend
	}
	path := filepath.Join(t.TempDir(), "agent.json")
	out, _ := json.Marshal(sp)
	if err := os.WriteFile(path, out, 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// Through the binary, on each backend: a run stores a preference; a second
// run for the same user finds it, in its prompt and with memory_search; a
// run for another user finds nothing.
func TestMemoryThroughTheBinary(t *testing.T) {
	script := func(name string) string {
		abs, _ := filepath.Abs(filepath.Join("../../examples/memory", name))
		return "scripted:" + abs
	}
	for _, tc := range []struct {
		name    string
		db      func(t *testing.T) string
		backend func(t *testing.T) string
	}{
		{"sqlite run store", func(t *testing.T) string { return filepath.Join(t.TempDir(), "runs.db") }, nil},
		{"postgres run store", func(t *testing.T) string { return testdb.Postgres(t) }, nil},
		{"redis", func(t *testing.T) string { return filepath.Join(t.TempDir(), "runs.db") }, func(t *testing.T) string { return testdb.Redis(t) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			db := tc.db(t)
			backend := ""
			if tc.backend != nil {
				backend = tc.backend(t)
			}
			agentPath := memoryAgent(t, backend)
			run := func(user, model string) map[string]any {
				t.Helper()
				code, out, errs := runCLI(t, "run", agentPath, "--model", script(model), "--db", db, "--json", "-q",
					"--input", "task=seats", "--user", user)
				if code != 0 {
					t.Fatalf("run for %s: exit %d\n%s", user, code, errs)
				}
				var res map[string]any
				if err := json.Unmarshal([]byte(out), &res); err != nil {
					t.Fatalf("%v\n%s", err, out)
				}
				return res
			}
			first := run("ada", "remember.json")
			if d, _ := first["memory_deltas"].([]any); len(d) != 2 {
				t.Errorf("the first run's memory_deltas: %v", first["memory_deltas"])
			}
			second := run("ada", "recall.json")
			obs := second["steps"].([]any)[0].(map[string]any)["observation"].(string)
			sys := second["messages"].([]any)[0].(map[string]any)["content"].(string)
			if !strings.Contains(obs, "Prefers window seats") || !strings.Contains(sys, "[preference] Prefers window seats") {
				t.Errorf("ada's second run: observation %s\nsystem prompt %s", obs, sys)
			}
			third := run("bob", "recall.json")
			obs = third["steps"].([]any)[0].(map[string]any)["observation"].(string)
			sys = third["messages"].([]any)[0].(map[string]any)["content"].(string)
			if strings.Contains(obs, "window") || strings.Contains(sys, "window") {
				t.Errorf("bob's run saw ada's memory: %s\n%s", obs, sys)
			}
		})
	}
}

// With AGENTRY_ENCRYPTION_KEY the memory's database (here a file of its
// own, so that the run log's transcript is elsewhere) holds none of its
// text; a run without the key, or with another, fails saying so.
func TestMemoryEncryptedThroughTheBinary(t *testing.T) {
	script := func(name string) string {
		abs, _ := filepath.Abs(filepath.Join("../../examples/memory", name))
		return "scripted:" + abs
	}
	db := filepath.Join(t.TempDir(), "memory.db")
	agentPath := memoryAgent(t, db)
	key := "AGENTRY_ENCRYPTION_KEY=" + strings.Repeat("ab", 32)
	args := func(model string) []string {
		return []string{"run", agentPath, "--model", script(model), "--no-store", "-q", "--input", "task=seats", "--user", "ada"}
	}
	if code, _, errs := runEnv(t, []string{key}, args("remember.json")...); code != 0 {
		t.Fatalf("exit %d\n%s", code, errs)
	}
	data, _ := os.ReadFile(db)
	wal, _ := os.ReadFile(db + "-wal")
	if bytes.Contains(append(data, wal...), []byte("Prefers window seats")) {
		t.Error("the database holds the memory in the clear")
	}
	if code, _, errs := runEnv(t, []string{key}, args("recall.json")...); code != 0 {
		t.Fatalf("with the key: exit %d\n%s", code, errs)
	}
	for _, tc := range []struct{ name, env, want string }{
		{"no key", "AGENTRY_ENCRYPTION_KEY=", "no key was given (set AGENTRY_ENCRYPTION_KEY)"},
		{"another key", "AGENTRY_ENCRYPTION_KEY=" + strings.Repeat("cd", 32), "does not open with this key"},
		{"not a key", "AGENTRY_ENCRYPTION_KEY=hunter2", "AGENTRY_ENCRYPTION_KEY: the key must be 32 bytes"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, _, errs := runEnv(t, []string{tc.env}, args("recall.json")...)
			if code == 0 || !strings.Contains(errs, tc.want) {
				t.Errorf("exit %d, want an error with %q:\n%s", code, tc.want, errs)
			}
		})
	}
}

// The database tools through the binary, in the run store's database:
// a write to the user's collection is kept (redacted) and listed in
// memory_deltas, one outside memory.collections is refused, and queries,
// searches and reads answer from what was written.
func TestDBToolsThroughTheBinary(t *testing.T) {
	dir := t.TempDir()
	script, _ := filepath.Abs("../../agent/testdata/memory/db.json")
	spec := filepath.Join(dir, "agent.json")
	os.WriteFile(spec, []byte(`{"agent_name": "planner", "version": "v1", "model_name": "scripted:`+script+`",
		"system_text": "You plan trips.",
		"tools": ["db_write", "db_read", "db_query", "db_search"],
		"memory": {"collections": ["trips:${user_id}"]}}`), 0o600)
	code, out, errs := runCLI(t, "run", spec, "--db", filepath.Join(dir, "runs.db"), "--user", "ada", "--json", "-q")
	if code != 0 {
		t.Fatalf("exit %d\n%s", code, errs)
	}
	var res struct {
		Steps []struct {
			Observation string `json:"observation"`
		} `json:"steps"`
		MemoryDeltas []map[string]any `json:"memory_deltas"`
	}
	if err := json.Unmarshal([]byte(out), &res); err != nil || len(res.Steps) != 5 {
		t.Fatalf("%v\n%s", err, out)
	}
	for i, want := range []string{`"key":"lisbon"`, "policy_violation", `"nights":3`, `"score"`, "not_found"} {
		if !strings.Contains(res.Steps[i].Observation, want) {
			t.Errorf("step %d: %s; want %q in it", i, res.Steps[i].Observation, want)
		}
	}
	if strings.Contains(out, "abcdefghijklmnopqrstuvwxyz0123456789") {
		t.Error("the secret in the written value reached the result")
	}
	if len(res.MemoryDeltas) != 1 || res.MemoryDeltas[0]["collection"] != "trips:ada" || res.MemoryDeltas[0]["key"] != "lisbon" {
		t.Errorf("memory_deltas: %v", res.MemoryDeltas)
	}
}

// TestRunLogEncryptedThroughTheBinary: with AGENTRY_ENCRYPTION_KEY the
// run store (memory and run logs in one SQLite file) holds neither the
// run's content nor a secret canary nor the memory's text, in the file or
// its WAL; trace needs the key and says so without it.
func TestRunLogEncryptedThroughTheBinary(t *testing.T) {
	script := func(name string) string {
		abs, _ := filepath.Abs(filepath.Join("../../examples/memory", name))
		return "scripted:" + abs
	}
	// Not shaped like a secret: redaction would not remove it, only sealing.
	const canary = "CANARYsealed-account-7731"
	db := filepath.Join(t.TempDir(), "runs.db")
	agentPath := memoryAgent(t, "") // memory in the run store's file
	key := "AGENTRY_ENCRYPTION_KEY=" + strings.Repeat("ab", 32)
	run := func(model, task string) (int, string, string) {
		return runEnv(t, []string{key}, "run", agentPath, "--model", script(model), "--db", db, "-q", "--json",
			"--input", "task="+task, "--user", "ada")
	}
	if code, _, errs := run("remember.json", "seats PLAINTEXT-TASK-MARKER "+canary); code != 0 {
		t.Fatalf("exit %d\n%s", code, errs)
	}
	code, out, errs := run("recall.json", "seats")
	if code != 0 {
		t.Fatalf("exit %d\n%s", code, errs)
	}
	var res struct{ ID string }
	json.Unmarshal([]byte(out), &res)
	data, _ := os.ReadFile(db)
	wal, _ := os.ReadFile(db + "-wal")
	all := append(data, wal...)
	for _, clear := range []string{"PLAINTEXT-TASK-MARKER", "CANARYsealed", "Prefers window seats", "window seats"} {
		if bytes.Contains(all, []byte(clear)) {
			t.Errorf("the store holds %q in the clear", clear)
		}
	}
	if code, _, errs := runEnv(t, []string{"AGENTRY_ENCRYPTION_KEY="}, "trace", res.ID, "--db", db); code != 1 && code != 2 || !strings.Contains(errs, "no key was given (agent.WithEncryptionKey; the binary reads AGENTRY_ENCRYPTION_KEY") {
		t.Errorf("trace without the key: exit %d\n%s", code, errs)
	}
	if code, out, errs := runEnv(t, []string{key}, "trace", res.ID, "--db", db); code != 0 || !strings.Contains(out, "window seats") {
		t.Errorf("trace with the key: exit %d\n%s\n%s", code, out, errs)
	}
}
