package main

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

var (
	binOnce sync.Once
	binPath string
	binErr  error
)

// coverDirEnv names a directory where the binaries the tests run write
// their coverage (scripts/test.sh sets it): the binary is then built
// with -cover, and its runs count toward the module's coverage floor.
const coverDirEnv = "AGENTRY_COVERDIR"

// binary builds the agentry binary once for the tests that run it as a
// user would, with the agentry_testtools tag: the release binary plus the
// charge tool of testtools.go.
func binary(t *testing.T) string {
	t.Helper()
	binOnce.Do(func() {
		dir, err := os.MkdirTemp("", "agentry-bin")
		if err != nil {
			binErr = err
			return
		}
		binPath = filepath.Join(dir, "agentry")
		args := []string{"build", "-tags", "agentry_testtools", "-o", binPath}
		if os.Getenv(coverDirEnv) != "" {
			args = append(args, "-cover", "-coverpkg=github.com/agentry/agentry/...")
		}
		out, err := exec.Command("go", append(args, ".")...).CombinedOutput()
		if err != nil {
			binErr = err
			t.Logf("%s", out)
		}
	})
	if binErr != nil {
		t.Fatalf("go build: %v", binErr)
	}
	return binPath
}

type runResult struct {
	Success         bool                   `json:"success"`
	Result          any                    `json:"result"`
	RawContent      string                 `json:"raw_content"`
	Validated       *bool                  `json:"validated"`
	TerminateReason string                 `json:"terminate_reason"`
	Iterations      int                    `json:"iterations"`
	PromptTemplate  string                 `json:"prompt_template"`
	Error           *struct{ Code string } `json:"error"`
	Metrics         struct {
		ParseErrors int `json:"parse_errors"`
	} `json:"metrics"`
	Steps []json.RawMessage `json:"steps"`
}

func runBinary(t *testing.T, args ...string) (int, runResult, string) {
	t.Helper()
	code, out, errs := runCLI(t, args...)
	var res runResult
	if strings.Contains(strings.Join(args, " "), "--json") {
		if err := json.Unmarshal([]byte(out), &res); err != nil {
			t.Fatalf("stdout is not a result: %v\n%s\n%s", err, out, errs)
		}
	}
	return code, res, errs
}

func TestModesThroughTheBinary(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary")
	}
	examples := filepath.Join("..", "..", "examples", "agents")
	t.Run("chooser A2", func(t *testing.T) {
		code, res, errs := runBinary(t, "run", "--agents", examples, "A2@v1", "--json",
			"--input", "task=Explain closures", "--input", "purpose=teach", "--input", "context=review")
		labels, _ := res.Result.(map[string]any)
		if code != 0 || !*res.Validated || labels["system"] != "Python_Programmer" || labels["confidence"] != "medium" {
			t.Errorf("exit %d %+v\n%s", code, res, errs)
		}
	})
	t.Run("writer corrected", func(t *testing.T) {
		code, res, errs := runBinary(t, "run", "--agents", examples, "release-notes", "--json", "--input", "project=agentry", "--input", "change=x")
		if code != 0 || res.Iterations != 2 || !*res.Validated || !strings.Contains(errs, "title: maxLength") {
			t.Errorf("exit %d %+v\n%s", code, res, errs)
		}
	})
	t.Run("extractor", func(t *testing.T) {
		code, res, _ := runBinary(t, "run", "--agents", examples, "booking@v1", "--json", "-q", "--input", "message=Two of us in Porto on 4 December")
		out, _ := res.Result.(map[string]any)
		if code != 0 || out["city"] != "Porto" || out["guests"] != 2.0 {
			t.Errorf("exit %d %+v", code, res)
		}
	})
	t.Run("never valid", func(t *testing.T) {
		code, res, _ := runBinary(t, "run", "--agents", "testdata/modes", "stubborn", "--json", "-q")
		if code != 1 || res.Success || *res.Validated || res.Error.Code != "validation_error" || res.Result != `{"heading": "Hello"}` ||
			res.TerminateReason != "completed" {
			t.Errorf("exit %d %+v", code, res)
		}
	})
	t.Run("react recovers", func(t *testing.T) {
		code, res, errs := runBinary(t, "run", "--agents", examples, "librarian", "--json",
			"--input", "reader=Ada", "--input", "request=Add Dune and Solaris to my list.")
		out, _ := res.Result.(map[string]any)
		if code != 0 || res.Metrics.ParseErrors != 1 || len(res.Steps) != 4 || out["count"] != 2.0 || res.PromptTemplate != "react/v1" ||
			!strings.Contains(errs, "the reply has no Thought, Action or Final Answer") {
			t.Errorf("exit %d %+v\n%s", code, res, errs)
		}
	})
}

func TestValidateLock(t *testing.T) {
	dir := t.TempDir()
	os.MkdirAll(filepath.Join(dir, "labels"), 0o755)
	os.WriteFile(filepath.Join(dir, "reply.json"), []byte(`{"turns": [{"content": "{}"}]}`), 0o600)
	spec := func(version, schema string) {
		os.WriteFile(filepath.Join(dir, "labels", version+".json"), []byte(`{"agent_name": "labels", "version": "`+version+`",
			"mode": "writer", "model_name": "scripted:../reply.json", "system_text": "Label.", "purpose_text": "Label it.", "output_schema": `+schema+`}`), 0o600)
	}
	spec("v1", `{"type": "object", "properties": {"a": {"type": "string"}}}`)
	if code, out, errs := run(t, "validate", "--lock", dir); code != 0 || !strings.Contains(out, "locked") {
		t.Fatalf("exit %d\n%s\n%s", code, out, errs)
	}
	// Same schema, other formatting: still the same version.
	spec("v1", `{"properties": {"a": {"type": "string"}},   "type": "object"}`)
	if code, _, errs := run(t, "validate", dir); code != 0 {
		t.Fatalf("reformatted schema refused: %s", errs)
	}
	// Changed in place: refused, naming the agent and the version.
	spec("v1", `{"type": "object", "properties": {"a": {"type": "integer"}}}`)
	code, _, errs := run(t, "validate", dir)
	if code != 2 || !strings.Contains(errs, "agent labels version v1: output_schema changed in place") {
		t.Errorf("exit %d\n%s", code, errs)
	}
	if code, _, _ := run(t, "validate", "--lock", dir); code != 2 {
		t.Error("--lock blessed a schema changed in place")
	}
	// run checks the lock too, before any model is called.
	code, _, errs = run(t, "run", "labels@v1", "--agents", dir, "-q")
	if code != 2 || !strings.Contains(errs, "output_schema changed in place") {
		t.Errorf("run of a spec changed in place: exit %d\n%s", code, errs)
	}
	// The right way: the old file back, the new schema as v2.
	spec("v1", `{"type": "object", "properties": {"a": {"type": "string"}}}`)
	spec("v2", `{"type": "object", "properties": {"a": {"type": "integer"}}}`)
	if code, _, errs := run(t, "validate", "--lock", dir); code != 0 {
		t.Errorf("new version refused: %s", errs)
	}
	data, _ := os.ReadFile(filepath.Join(dir, "agentry.lock"))
	if !strings.Contains(string(data), `"v2": "sha256:`) {
		t.Errorf("lock %s", data)
	}
}

// TestStoreRefusesAVersionChangedInPlace: with no lock file, the run store
// remembers the output schema of each NAME@VERSION it ran and refuses a
// run whose schema differs, naming the version; a new version runs.
func TestStoreRefusesAVersionChangedInPlace(t *testing.T) {
	dir := t.TempDir()
	os.MkdirAll(filepath.Join(dir, "labels"), 0o755)
	os.WriteFile(filepath.Join(dir, "reply.json"), []byte(`{"turns": [{"content": "{\"a\": \"x\"}"}]}`), 0o600)
	spec := func(version, schema string) {
		os.WriteFile(filepath.Join(dir, "labels", version+".json"), []byte(`{"agent_name": "labels", "version": "`+version+`",
			"mode": "writer", "model_name": "scripted:../reply.json", "system_text": "Label.", "purpose_text": "Label it.", "output_schema": `+schema+`}`), 0o600)
	}
	db := filepath.Join(dir, "runs.db")
	spec("v1", `{"type": "object", "properties": {"a": {"type": "string"}}}`)
	if code, _, errs := run(t, "run", "labels@v1", "--agents", dir, "--db", db, "-q"); code != 0 {
		t.Fatalf("first run: exit %d\n%s", code, errs)
	}
	// Reformatted, the same schema: the same version.
	spec("v1", `{"properties": {"a": {"type": "string"}},  "type": "object"}`)
	if code, _, errs := run(t, "run", "labels@v1", "--agents", dir, "--db", db, "-q"); code != 0 {
		t.Fatalf("the same schema reformatted: exit %d\n%s", code, errs)
	}
	spec("v1", `{"type": "object", "properties": {"a": {"type": "string"}, "b": {"type": "integer"}}}`)
	code, _, errs := run(t, "run", "labels@v1", "--agents", dir, "--db", db, "-q")
	if code != 2 || !strings.Contains(errs, "agent labels version v1: its output_schema") || !strings.Contains(errs, "new version") {
		t.Errorf("a schema changed in place: exit %d\n%s", code, errs)
	}
	spec("v2", `{"type": "object", "properties": {"a": {"type": "string"}, "b": {"type": "integer"}}}`)
	if code, _, errs := run(t, "run", "labels@v2", "--agents", dir, "--db", db, "-q"); code != 0 {
		t.Errorf("the new version: exit %d\n%s", code, errs)
	}
}
