package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	// Runs are stored by default: in a directory of the tests', not the
	// user's.
	data, err := os.MkdirTemp("", "agentry-data")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	os.Setenv("XDG_DATA_HOME", data)
	os.Unsetenv("AGENTRY_DB")
	if dir := os.Getenv(coverDirEnv); dir != "" {
		// The binaries the tests run write their coverage here (binary
		// builds them with -cover), for the coverage floor to count.
		os.Setenv("GOCOVERDIR", dir)
	}
	code := m.Run()
	os.RemoveAll(data)
	if binPath != "" {
		os.RemoveAll(filepath.Dir(binPath))
	}
	if code == 0 {
		if err := goleak.Find(goleak.IgnoreTopFunction("net/http.(*persistConn).writeLoop"),
			goleak.IgnoreTopFunction("internal/poll.runtime_pollWait"),
			goleak.IgnoreTopFunction("go.opencensus.io/stats/view.(*worker).start")); err != nil { // started by the genai SDK at init
			fmt.Fprintln(os.Stderr, "goleak:", err)
			code = 1
		}
	}
	os.Exit(code)
}

func run(t *testing.T, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errb bytes.Buffer
	code = execute(args, strings.NewReader(""), &out, &errb)
	return code, out.String(), errb.String()
}

const quickstart = "../../examples/quickstart/agent.json"

func TestQuickstart(t *testing.T) {
	code, out, errs := run(t, "run", quickstart, "--input", "city=Lisbon", "--input", "days=3")
	if code != 0 {
		t.Fatalf("exit %d\n%s", code, errs)
	}
	if !strings.Contains(out, "3 days in Lisbon") {
		t.Errorf("stdout %q", out)
	}
	for _, want := range []string{"▶ quickstart@v1", "turn 1", "→ kv_set", "← kv_set ok", "→ kv_list", "← kv_get ok", "turn 4", "✓ quickstart: completed after 4 turns"} {
		if !strings.Contains(errs, want) {
			t.Errorf("progress lacks %q:\n%s", want, errs)
		}
	}
}

func TestRunJSONAndEvents(t *testing.T) {
	events := filepath.Join(t.TempDir(), "events.jsonl")
	os.WriteFile(events, []byte("old\n"), 0o644) // overwritten, and made the owner's only
	code, out, errs := run(t, "run", quickstart, "--input", "city=Lisbon", "--input", "days=3", "--json", "--events", events, "-q")
	if code != 0 || errs != "" {
		t.Fatalf("exit %d, stderr %q", code, errs)
	}
	if st, err := os.Stat(events); err != nil || st.Mode().Perm() != 0o600 {
		t.Errorf("the events file's mode: %v, %v; want 0600", st.Mode().Perm(), err)
	}
	var res struct {
		Success    bool     `json:"success"`
		ToolsUsed  []string `json:"tools_used"`
		Iterations int      `json:"iterations"`
		Cost       float64  `json:"estimated_cost_usd"`
		Model      string   `json:"model"`
		Steps      []struct {
			Action struct {
				Tool string `json:"tool"`
			} `json:"action"`
		} `json:"steps"`
	}
	if err := json.Unmarshal([]byte(out), &res); err != nil {
		t.Fatalf("stdout is not the result JSON: %v\n%s", err, out)
	}
	if !res.Success || res.Iterations != 4 || len(res.Steps) != 5 || strings.Join(res.ToolsUsed, ",") != "kv_set,kv_list,kv_get" {
		t.Errorf("result %+v", res)
	}
	// An offline script that stands for no model is labelled as the
	// spec names it and costs nothing.
	if res.Cost != 0 || res.Model != "model.json" {
		t.Errorf("cost %v model %q, want 0 and model.json", res.Cost, res.Model)
	}
	f, err := os.Open(events)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	counts := map[string]int{}
	var first, last string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		var e struct{ Type string }
		if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
			t.Fatalf("event line %q: %v", sc.Text(), err)
		}
		if first == "" {
			first = e.Type
		}
		last = e.Type
		counts[e.Type]++
	}
	if first != "run_start" || last != "run_end" || counts["tool_call_start"] != 5 || counts["tool_call_end"] != 5 || counts["turn_start"] != 4 {
		t.Errorf("events: first %s last %s counts %v", first, last, counts)
	}
}

func TestExitCodes(t *testing.T) {
	tests := []struct {
		name string
		args []string
		code int
		want string // in stderr
	}{
		{"missing input", []string{"run", quickstart}, 2, `missing input key "city"`},
		{"unknown field", []string{"run", "testdata/bad_field.json"}, 2, `unknown field "limits.max_turn" (did you mean "max_turns"?)`},
		{"unknown tool", []string{"run", "testdata/unknown_tool.json"}, 2, `unknown tool "kv_gte"`},
		{"no such file", []string{"run", "testdata/none.json"}, 2, "does not exist"},
		{"no such agent", []string{"run", "ghost", "--agents", "testdata"}, 2, `unknown agent "ghost"`},
		{"bad input flag", []string{"run", quickstart, "--input", "city"}, 2, "want key=value"},
		{"bad input file", []string{"run", quickstart, "--input-file", "testdata/loop.json"}, 2, ""},
		{"missing input file", []string{"run", quickstart, "--input-file", "testdata/none.json"}, 2, "--input-file"},
		{"unknown flag", []string{"run", quickstart, "--bogus"}, 2, "unknown flag"},
		{"no arguments", []string{"run"}, 2, "run takes one spec file"},
		{"unknown command", []string{"fly"}, 2, "unknown command"},
		{"bad model", []string{"run", quickstart, "--input", "city=x", "--input", "days=1", "--model", "scripted:testdata/none.json"}, 2, "none.json"},
		{"run fails", []string{"run", "testdata/loops.json"}, 1, "max_turns"},
		{"validate bad", []string{"validate", "testdata/bad_field.json", "testdata/unknown_tool.json"}, 2, "kv_gte"},
		{"validate good", []string{"validate", quickstart, "testdata/loops.json"}, 0, ""},
		{"validate undeclared var", []string{"validate", "testdata/undeclared_var.json"}, 2, "purpose_text uses ${days}, which no input key provides (declared: city)"},
		{"validate unpriced budget", []string{"validate", "testdata/unpriced_budget.json"}, 2, `model "no-such-model-2099" has no price`},
		{"run unpriced budget", []string{"run", "testdata/unpriced_budget.json"}, 2, `"pricing": {`},
		{"bad log level", []string{"run", quickstart, "--log-level", "loud"}, 2, `--log-level "loud": want debug, info, warn, error or off`},
		{"bad log format", []string{"run", quickstart, "--log-format", "xml"}, 2, `--log-format "xml": want json or text`},
		{"version takes no arguments", []string{"version", "now"}, 2, "unknown command"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, _, errs := run(t, tt.args...)
			if code != tt.code || !strings.Contains(errs, tt.want) {
				t.Errorf("exit %d (want %d), stderr:\n%s\nwant %q", code, tt.code, errs, tt.want)
			}
		})
	}
}

func TestRunByName(t *testing.T) {
	code, out, errs := run(t, "run", "notes", "--agents", "testdata/agents")
	if code != 0 || !strings.Contains(out, "v2 answers at once.") {
		t.Errorf("latest version: exit %d %q %s", code, out, errs)
	}
	code, _, errs = run(t, "run", "notes@v1", "--agents", "testdata/agents")
	if code != 1 || !strings.Contains(errs, "max_turns") {
		t.Errorf("notes@v1: exit %d %s", code, errs)
	}
}

func TestFailedRunPrintsResult(t *testing.T) {
	code, out, _ := run(t, "run", "testdata/loops.json", "--json", "-q")
	var res struct {
		Success         bool   `json:"success"`
		TerminateReason string `json:"terminate_reason"`
		Error           struct {
			Code string `json:"code"`
		} `json:"error"`
	}
	if err := json.Unmarshal([]byte(out), &res); err != nil || code != 1 {
		t.Fatalf("exit %d: %v\n%s", code, err, out)
	}
	if res.Success || res.TerminateReason != "max_turns" || res.Error.Code != "max_turns" {
		t.Errorf("%+v", res)
	}
}

// TestBadInputPrintsResult: bad input is a Result with --json too, and
// still exits 2.
func TestBadInputPrintsResult(t *testing.T) {
	code, out, stderr := run(t, "run", quickstart, "--input", "city=Lisbon", "--json", "-q")
	var res struct {
		Success bool   `json:"success"`
		ID      string `json:"id"`
		Error   struct {
			Code        string `json:"code"`
			Message     string `json:"message"`
			Recoverable bool   `json:"recoverable"`
		} `json:"error"`
	}
	if err := json.Unmarshal([]byte(out), &res); err != nil || code != 2 {
		t.Fatalf("exit %d: %v\n%s\n%s", code, err, out, stderr)
	}
	if res.Success || res.ID == "" || res.Error.Code != "validation_error" || res.Error.Recoverable || !strings.Contains(res.Error.Message, `missing input key "days"`) {
		t.Errorf("%+v", res)
	}
}

func TestValidateAgentsDir(t *testing.T) {
	code, out, errs := run(t, "validate", "testdata/agents")
	if code != 2 {
		t.Fatalf("exit %d", code)
	}
	for _, want := range []string{"notes/v1.json", "notes/v2.json"} {
		if !strings.Contains(out, want) {
			t.Errorf("stdout lacks %q:\n%s", want, out)
		}
	}
	for _, want := range []string{"cyclic/v1.json", "sub-agent cycle: cyclic -> cyclic", "mismatch/v1.json", `agent_name "other"`, "2 invalid"} {
		if !strings.Contains(errs, want) {
			t.Errorf("stderr lacks %q:\n%s", want, errs)
		}
	}
}

// TestHTTPAndKV is the Proposal seed's success criterion: an agent runs a
// multi-step task with two tools, HTTP and an in-memory KV store.
func TestHTTPAndKV(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/releases/latest" {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, `{"project": "x", "version": "2.0.0", "api_changes": ["removed /v1/items", "added /v2/items"]}`)
	}))
	defer srv.Close()
	dir := t.TempDir()
	script := fmt.Sprintf(`{"turns": [
	  {"content": "Fetch the release notes.", "tool_calls": [{"name": "http_get", "arguments": {"url": "%s/releases/latest"}}]},
	  {"tool_calls": [{"name": "kv_set", "arguments": {"key": "release:x", "value": {"version": "2.0.0", "api_changes": 2}}}]},
	  {"tool_calls": [{"name": "kv_get", "arguments": {"key": "release:x"}}]},
	  {"content": "Release 2.0.0 of x has 2 API changes: /v1/items was removed and /v2/items added."}
	]}`, srv.URL)
	os.WriteFile(filepath.Join(dir, "model.json"), []byte(script), 0o600)
	os.WriteFile(filepath.Join(dir, "agent.json"), []byte(`{"agent_name": "releases", "version": "v1",
	  "model_name": "scripted:model.json", "system_text": "Summarise API changes of ${project}.", "input_keys": ["project"],
	  "tools": ["http_get", "kv_set", "kv_get"]}`), 0o600)

	code, out, errs := run(t, "run", filepath.Join(dir, "agent.json"), "--input", "project=x", "--json", "-q")
	if !strings.Contains(out, `\"type\":\"blocked\"`) {
		t.Fatalf("without --allow-private-network the loopback server must be blocked; exit %d\n%s\n%s", code, out, errs)
	}
	code, out, errs = run(t, "run", filepath.Join(dir, "agent.json"), "--input", "project=x", "--json", "-q", "--allow-private-network")
	if code != 0 {
		t.Fatalf("exit %d\n%s", code, errs)
	}
	var res struct {
		Result string `json:"result"`
		Steps  []struct {
			Observation string `json:"observation"`
		} `json:"steps"`
	}
	if err := json.Unmarshal([]byte(out), &res); err != nil {
		t.Fatal(err)
	}
	if len(res.Steps) != 3 || !strings.Contains(res.Steps[0].Observation, `"version":"2.0.0"`) ||
		res.Steps[2].Observation != `{"key":"release:x","value":{"version":"2.0.0","api_changes":2}}` {
		t.Errorf("steps %+v", res.Steps)
	}
	if !strings.Contains(res.Result, "2 API changes") {
		t.Errorf("result %q", res.Result)
	}
}

// TestBinary builds the agentry binary and runs the README's first command
// with it, as a new user would.
func TestBinary(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary")
	}
	bin := binary(t)
	cmd := exec.Command(bin, "run", "examples/quickstart/agent.json", "--input", "city=Lisbon", "--input", "days=3")
	cmd.Dir = "../.."
	var out, errs bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errs
	if err := cmd.Run(); err != nil {
		t.Fatalf("%v\n%s", err, errs.String())
	}
	if !strings.Contains(out.String(), "3 days in Lisbon") || !strings.Contains(errs.String(), "→ kv_set") {
		t.Errorf("stdout %q\nstderr %q", out.String(), errs.String())
	}
	cmd = exec.Command(bin, "run", "examples/quickstart/agent.json")
	cmd.Dir = "../.."
	err := cmd.Run()
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 2 {
		t.Errorf("missing input: %v, want exit status 2", err)
	}
}

// TestRunLogs reads the JSON log records of a run: each carries the agent,
// its version, the run, user and correlation ids and the turn; without the
// flags nothing but the progress reaches stderr.
func TestRunLogs(t *testing.T) {
	args := []string{"run", quickstart, "--input", "city=Lisbon", "--input", "days=3", "--user", "u-7", "--correlation-id", "req-42"}
	code, _, errs := run(t, append(args, "-q", "--log-format", "json", "--log-level", "debug")...)
	if code != 0 {
		t.Fatalf("exit %d\n%s", code, errs)
	}
	msgs := map[string]int{}
	for line := range strings.Lines(errs) {
		var rec map[string]any
		if err := json.Unmarshal([]byte(line), &rec); err != nil {
			t.Fatalf("not a JSON record: %q", line)
		}
		msg, _ := rec["msg"].(string)
		msgs[msg]++
		for k, want := range map[string]any{"agent": "quickstart", "agent_version": "v1", "user_id": "u-7", "correlation_id": "req-42"} {
			if rec[k] != want {
				t.Errorf("%s: %s = %v, want %v", msg, k, rec[k], want)
			}
		}
		if id, _ := rec["run_id"].(string); !strings.HasPrefix(id, "run_") {
			t.Errorf("%s: run_id %v", msg, rec["run_id"])
		}
		if _, ok := rec["turn"]; !ok {
			t.Errorf("%s: no turn", msg)
		}
	}
	if msgs["run start"] != 1 || msgs["run end"] != 1 || msgs["tool call"] != 5 || msgs["model call"] != 4 {
		t.Errorf("records %v", msgs)
	}

	code, _, errs = run(t, append(args, "-q", "--log-level", "warn")...)
	if code != 0 || errs != "" {
		t.Errorf("a clean run logged at warn: exit %d, %q", code, errs)
	}
	code, _, errs = run(t, args...)
	if code != 0 || strings.Contains(errs, `"msg"`) || strings.Contains(errs, "level=") {
		t.Errorf("logs without --log-level: %q", errs)
	}
}

func TestAgentsCommand(t *testing.T) {
	code, out, errs := run(t, "agents", "--agents", "../../examples/agents", "--json")
	var list []struct {
		Name     string `json:"name"`
		Versions []struct {
			Version, Mode, Model string
			Tools                []string
		} `json:"versions"`
	}
	if err := json.Unmarshal([]byte(out), &list); err != nil || code != 0 {
		t.Fatalf("exit %d: %v\n%s\n%s", code, err, out, errs)
	}
	found := false
	for _, a := range list {
		if a.Name == "librarian" && len(a.Versions) == 1 && a.Versions[0].Mode == "react" && len(a.Versions[0].Tools) == 2 {
			found = true
		}
	}
	if !found {
		t.Errorf("librarian is not listed as it is: %s", out)
	}
	code, out, _ = run(t, "agents", "--agents", "../../examples/agents")
	if code != 0 || !strings.Contains(out, "AGENT") || !strings.Contains(out, "librarian") {
		t.Errorf("exit %d\n%s", code, out)
	}
	dir := t.TempDir()
	os.MkdirAll(dir+"/broken", 0o755)
	os.WriteFile(dir+"/broken/v1.json", []byte(`{"agent_name": "broken", "version": "v1", "tools": 3}`), 0o600)
	if code, out, _ := run(t, "agents", "--agents", dir); code != 2 || !strings.Contains(out, "invalid") {
		t.Errorf("an invalid version: exit %d\n%s", code, out)
	}
	// Valid specs that do not build together: a sub-agent the directory
	// lacks. The directory loads into one registry, or the command says
	// which agent does not build.
	dir = t.TempDir()
	os.MkdirAll(dir+"/boss", 0o755)
	os.WriteFile(dir+"/boss/v1.json", []byte(`{"agent_name": "boss", "version": "v1", "model_name": "scripted:x.json", "tools": ["agent:ghost"]}`), 0o600)
	if code, _, errs := run(t, "agents", "--agents", dir); code != 2 || !strings.Contains(errs, "boss@v1") || !strings.Contains(errs, "ghost") {
		t.Errorf("an agent that does not build: exit %d\n%s", code, errs)
	}
	// An agent with memory builds as validate builds it: no run store
	// of the host's is needed to list it.
	dir = t.TempDir()
	os.MkdirAll(dir+"/concierge", 0o755)
	script, _ := filepath.Abs("../../examples/memory/remember.json")
	data, _ := os.ReadFile("../../examples/memory/agent.json")
	data = bytes.Replace(data, []byte(`"scripted:remember.json"`), []byte(`"scripted:`+script+`"`), 1)
	os.WriteFile(dir+"/concierge/v1.json", data, 0o600)
	if code, out, errs := run(t, "agents", "--agents", dir, "--db", filepath.Join(t.TempDir(), "runs.db")); code != 0 || !strings.Contains(out, "concierge") {
		t.Errorf("an agent with memory: exit %d\n%s\n%s", code, out, errs)
	}
}

// enumWriter is a writer whose output schema has an enum and whose spec
// lists no enums (the Agent Stack's 4.3.3b).
const enumWriter = `{"agent_name": "t", "version": "v1", "mode": "writer", "model_name": "claude-sonnet-4-5", "system_text": "Write.",
	"purpose_text": "Write it.", "output_schema": {"type": "object", "properties": {"text": {"type": "string"}, "tone": {"type": "string", "enum": ["warm", "dry"]}}}}`

// TestValidate: a file gets one verdict, naming every problem at once:
// an unknown field does not hide the rest, a model its provider's
// catalog lacks is refused unless the spec says it is unlisted on purpose
// or serves it at its own base_url, and a file laid out as an agents
// directory's must say what its path says. A spec that does not read is
// critical, one that reads but does not build an error.
func TestValidate(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct {
		name, file, text string
		code             int
		want, not        []string
	}{
		{"a misspelt model", "t.json", `{"agent_name": "t", "version": "v1", "model_name": "claude-sonet-4", "system_text": "x"}`, 2,
			[]string{`error: model_name "claude-sonet-4": anthropic's catalog does not have this model`, `"model_unlisted": true`}, nil},
		{"an unlisted model on purpose", "t.json", `{"agent_name": "t", "version": "v1", "model_name": "claude-sonet-4", "model_unlisted": true, "system_text": "x"}`, 0,
			[]string{"✓"}, []string{"⚠", "invalid", "warning"}},
		{"model_unlisted for a listed model", "t.json", `{"agent_name": "t", "version": "v1", "model_name": "claude-sonnet-4-5", "model_unlisted": true, "system_text": "x"}`, 0,
			[]string{"✓", "    warning: model_unlisted is set, but every model is in its provider's catalog"}, []string{"invalid"}},
		{"a limit another makes unreachable", "t.json", `{"agent_name": "t", "version": "v1", "model_name": "claude-sonnet-4-5", "system_text": "x",
			"limits": {"timeout_ms": 1000, "tool_timeout_ms": 5000}}`, 0,
			[]string{"✓", "    warning: limits.tool_timeout_ms 5000 is longer than limits.timeout_ms 1000"}, []string{"invalid"}},
		{"a model at a base_url", "t.json", `{"agent_name": "t", "version": "v1", "model_name": "openai:my-local-model", "base_url": "http://127.0.0.1:9/v1", "system_text": "x"}`, 0,
			[]string{"✓"}, nil},
		{"a known dated model", "t.json", `{"agent_name": "t", "version": "v1", "model_name": "claude-sonnet-4-5-20250929", "system_text": "x"}`, 0,
			[]string{"✓"}, nil},
		{"every problem at once", "t.json", `{"agent_name": "t", "version": "v1", "model_name": "scripted:x.json", "max_turn": 3, "temprature": 1,
			"limits": {"max_turns": -1}, "temperature": 9, "tools": ["kv_set", "kv_sett"]}`, 2,
			[]string{`unknown field "max_turn"`, `unknown field "temprature" (did you mean "temperature"?)`, "temperature 9 is outside 0..2", "max_turns",
				`tools[1]: unknown tool "kv_sett"`}, []string{"✓", `unknown tool "kv_set"`}},
		{"a file its path contradicts", "support/v2.json", `{"agent_name": "billing", "version": "v1", "model_name": "claude-sonnet-4-5", "system_text": "x"}`, 2,
			[]string{`the file says agent_name "billing" version "v1" but its path says "support" version "v2"`}, []string{"✓"}},
		{"a file its path contradicts, and more", "support/v3.json", `{"agent_name": "billing", "version": "v3", "model_name": "claude-sonnet-4-5", "system_text": "x", "tools": ["kv_sett"]}`, 2,
			[]string{`its path says "support" version "v3"`, `tools[0]: unknown tool "kv_sett"`}, []string{"✓"}},
		{"in an agents directory: every problem at once", "agents/t/v1.json", `{"agent_name": "t", "version": "v1", "model_name": "claude-sonet-4", "system_text": "x", "tools": ["kv_sett"]}`, 2,
			[]string{`anthropic's catalog does not have this model`, `tools[0]: unknown tool "kv_sett"`}, []string{"✓"}},
		{"in an agents directory: its path contradicted, and more", "agents/u/v1.json", `{"agent_name": "w", "version": "v1", "model_name": "claude-sonnet-4-5", "system_text": "x", "tools": ["kv_sett"]}`, 2,
			[]string{`its path says "u" version "v1"`, `tools[0]: unknown tool "kv_sett"`}, []string{"✓"}},
		{"a schema enum no enums list", "t.json", enumWriter, 0,
			[]string{"✓", "    warning: output_schema.properties.tone has an enum that enums does not list"}, []string{"invalid"}},
		{"a schema enum no enums list, strict", "t.json", enumWriter, 2,
			[]string{"✗", "--strict", "    warning: output_schema.properties.tone has an enum that enums does not list"}, []string{"✓"}},
		{"a pipeline's inline stage warns, strict", "p.json", `{"pipeline_name": "p", "version": "v1", "stages": [{"name": "w", "agent": ` + enumWriter + `}]}`, 2,
			[]string{"✗", "--strict", "stage w: output_schema.properties.tone has an enum"}, []string{"✓"}},
		{"does not read", "t.json", `{"agent_name": "t", `, 2, []string{"    critical: "}, nil},
		{"does not build", "t.json", `{"agent_name": "t", "version": "v1", "mode": "chooser"}`, 2, []string{"    error: "}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(dir, tc.file)
			os.MkdirAll(filepath.Dir(path), 0o755)
			os.WriteFile(path, []byte(tc.text), 0o600)
			target := path
			if agents, _, ok := strings.Cut(tc.file, "/"); agents == "agents" && ok {
				target = filepath.Join(dir, tc.name, "agents") // validate DIR: the file's directory alone
				path = filepath.Join(target, strings.TrimPrefix(tc.file, "agents/"))
				os.MkdirAll(filepath.Dir(path), 0o755)
				os.WriteFile(path, []byte(tc.text), 0o600)
			}
			args := []string{"validate", target}
			if strings.HasSuffix(tc.name, ", strict") {
				args = append(args, "--strict")
			}
			code, out, errs := run(t, args...)
			all := out + errs
			if code != tc.code || strings.Count(all, path) != 1 {
				t.Errorf("exit %d (want %d), %d verdicts\n%s", code, tc.code, strings.Count(all, path), all)
			}
			for _, w := range tc.want {
				if !strings.Contains(all, w) {
					t.Errorf("want %q in\n%s", w, all)
				}
			}
			for _, n := range tc.not {
				if strings.Contains(all, n) {
					t.Errorf("%q in\n%s", n, all)
				}
			}
		})
	}
}

// TestTraceFlagsRefused: trace flags that cannot be read, or that do not
// go together, stop the run before it starts, naming the flag.
func TestTraceFlagsRefused(t *testing.T) {
	const trace = "4bf92f3577b34da6a3ce929d0e0e4736"
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"tracestate alone", []string{"--tracestate", "vendor=a"}, "--tracestate: give --traceparent or --trace-id too"},
		{"both ids", []string{"--trace-id", trace, "--traceparent", "00-" + trace + "-00f067aa0ba902b7-01"}, "--trace-id and --traceparent: give one"},
		{"a traceparent as trace id", []string{"--trace-id", "00-" + trace + "-00f067aa0ba902b7-01"}, "--trace-id"},
		{"a malformed tracestate", []string{"--trace-id", trace, "--tracestate", "not a list"}, "tracestate"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, _, errs := run(t, append([]string{"run", quickstart, "--input", "city=Lisbon", "--input", "days=3", "--no-store"}, tc.args...)...)
			if code == 0 || !strings.Contains(errs, tc.want) {
				t.Errorf("exit %d, %q; want an error naming %q", code, errs, tc.want)
			}
		})
	}
}

// TestDeterministicThroughTheBinary: --seed and --now make two runs of
// an agent, and of a pipeline, print byte-identical JSON and events; a
// run store keeps the seeded pipeline's every stage; --trace-id and
// --traceparent set the trace id the Result and every event carry.
func TestDeterministicThroughTheBinary(t *testing.T) {
	const trace = "4bf92f3577b34da6a3ce929d0e0e4736"
	det := []string{"--seed", "7", "--now", "2026-01-02T03:04:05Z", "--json"}
	for _, tt := range []struct {
		name  string
		args  []string
		trace []string
	}{
		{"agent", []string{"run", quickstart, "--input", "city=Lisbon", "--input", "days=3"}, []string{"--trace-id", trace}},
		{"pipeline", []string{"run", "../../examples/pipelines/review.json", "--input", "task=store the release"},
			[]string{"--traceparent", "00-" + trace + "-00f067aa0ba902b7-01"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var outs, events [2]string
			for i := range outs {
				dir := t.TempDir()
				ev := filepath.Join(dir, "events.jsonl")
				args := append(append(append(slices.Clip(tt.args), det...), tt.trace...), "--db", filepath.Join(dir, "runs.db"), "--events", ev)
				code, out, errs := run(t, args...)
				if code != 0 {
					t.Fatalf("exit %d\n%s", code, errs)
				}
				b, _ := os.ReadFile(ev)
				outs[i], events[i] = out, string(b)
			}
			if outs[0] != outs[1] || events[0] != events[1] {
				t.Errorf("two deterministic runs differ:\n%s\n%s", outs[0], outs[1])
			}
			var res struct {
				TraceID       string `json:"trace_id"`
				Deterministic bool   `json:"deterministic"`
			}
			if err := json.Unmarshal([]byte(outs[0]), &res); err != nil || res.TraceID != trace {
				t.Errorf("the Result's trace id %q (%v)", res.TraceID, err)
			}
			lines := strings.Split(strings.TrimSpace(events[0]), "\n")
			for _, line := range lines {
				if !strings.Contains(line, `"trace_id":"`+trace+`"`) {
					t.Errorf("an event without the trace id: %s", line)
					break
				}
			}
			if len(lines) < 5 {
				t.Errorf("%d events", len(lines))
			}
		})
	}
}
