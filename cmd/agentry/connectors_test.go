package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Through the binary: the files connector, configured by the spec, reads
// and writes under its root and refuses to leave it.
func TestFilesConnectorThroughTheBinary(t *testing.T) {
	dir := t.TempDir()
	os.MkdirAll(filepath.Join(dir, "data"), 0o750)
	os.WriteFile(filepath.Join(dir, "data", "plan.txt"), []byte("day 1: Alfama"), 0o600)
	os.WriteFile(filepath.Join(dir, "secret.txt"), []byte("outside the root"), 0o600)
	os.WriteFile(filepath.Join(dir, "agent.json"), []byte(`{"agent_name": "clerk", "version": "v1", "model_name": "scripted:turns.json",
		"system_text": "Keep the plan.", "tools": ["file_read", "file_write"],
		"connectors": {"files": {"root": "data", "write": true, "max_bytes": 1024}}}`), 0o600)
	os.WriteFile(filepath.Join(dir, "turns.json"), []byte(`{"turns": [
		{"tool_calls": [{"name": "file_read", "arguments": {"path": "plan.txt"}},
			{"name": "file_read", "arguments": {"path": "../secret.txt"}},
			{"name": "file_write", "arguments": {"path": "out/summary.txt", "content": "one day"}}]},
		{"content": "Done."}]}`), 0o600)
	code, out, errs := runCLI(t, "run", filepath.Join(dir, "agent.json"), "--no-store", "--json", "-q")
	if code != 0 {
		t.Fatalf("exit %d\n%s", code, errs)
	}
	if !strings.Contains(out, "day 1: Alfama") || strings.Contains(out, "outside the root") || !strings.Contains(out, "leaves the working directory") {
		t.Errorf("result:\n%s", out)
	}
	if data, _ := os.ReadFile(filepath.Join(dir, "data", "out", "summary.txt")); string(data) != "one day" {
		t.Errorf("the written file holds %q", data)
	}
	for _, tc := range []struct{ name, connectors, tools, want string }{
		{"unknown connector", `{"fax": {}}`, `["file_read"]`, `connectors.fax: unknown connector "fax"`},
		{"no root", `{"files": {}}`, `["file_read"]`, `connectors.files: root: required`},
		{"unknown field", `{"files": {"root": "data", "writable": true}}`, `["file_read"]`, `writable`},
		{"write not turned on", `{"files": {"root": "data"}}`, `["file_write"]`, `unknown tool "file_write"`},
		{"not configured", ``, `["file_read"]`, `unknown tool "file_read"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			conn := ""
			if tc.connectors != "" {
				conn = `, "connectors": ` + tc.connectors
			}
			path := filepath.Join(dir, "bad.json")
			os.WriteFile(path, []byte(`{"agent_name": "clerk", "version": "v1", "model_name": "scripted:turns.json", "tools": `+tc.tools+conn+`}`), 0o600)
			code, _, errs := runCLI(t, "run", path, "--no-store", "-q")
			if code != 2 || !strings.Contains(errs, tc.want) {
				t.Errorf("exit %d, %s; want 2 naming %s", code, errs, tc.want)
			}
		})
	}
}

// Through the binary: the shell connector runs what its allowlist names,
// as argv, and refuses the rest.
func TestShellConnectorThroughTheBinary(t *testing.T) {
	dir := t.TempDir()
	os.MkdirAll(filepath.Join(dir, "work"), 0o750)
	os.WriteFile(filepath.Join(dir, "agent.json"), []byte(`{"agent_name": "ops", "version": "v1", "model_name": "scripted:turns.json",
		"system_text": "Run what is needed.", "tools": ["shell"],
		"connectors": {"shell": {"allow": ["echo"], "dir": "work", "timeout_ms": 2000}}}`), 0o600)
	os.WriteFile(filepath.Join(dir, "turns.json"), []byte(`{"turns": [
		{"tool_calls": [{"name": "shell", "arguments": {"argv": ["echo", "hello; rm -rf /"]}},
			{"name": "shell", "arguments": {"argv": ["rm", "-rf", "/"]}}]},
		{"content": "Done."}]}`), 0o600)
	code, out, errs := runCLI(t, "run", filepath.Join(dir, "agent.json"), "--no-store", "--json", "-q")
	if code != 0 {
		t.Fatalf("exit %d\n%s", code, errs)
	}
	if !strings.Contains(out, `hello; rm -rf /\\n`) || !strings.Contains(out, `program \"rm\" is not on the allowlist`) {
		t.Errorf("result:\n%s", out)
	}
	path := filepath.Join(dir, "bad.json")
	for _, tc := range []struct{ name, conn, want string }{
		{"no allowlist", `{"shell": {"dir": "work"}}`, "connectors.shell: allow:"},
		{"a path allowed", `{"shell": {"allow": ["/bin/sh"], "dir": "work"}}`, "bare program name"},
		{"no dir", `{"shell": {"allow": ["echo"]}}`, "connectors.shell: dir:"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			os.WriteFile(path, []byte(`{"agent_name": "ops", "version": "v1", "model_name": "scripted:turns.json", "tools": ["shell"], "connectors": `+tc.conn+`}`), 0o600)
			if code, _, errs := runCLI(t, "run", path, "--no-store", "-q"); code != 2 || !strings.Contains(errs, tc.want) {
				t.Errorf("exit %d, %s; want 2 naming %s", code, errs, tc.want)
			}
		})
	}
}

// Through the binary: the sql connector reads with parameters, and its
// read-only query refuses a write.
func TestSQLConnectorThroughTheBinary(t *testing.T) {
	dir := t.TempDir()
	db := filepath.Join(dir, "shop.db")
	st, err := openStore(t.Context(), db) // any SQLite file will do: the store's own tables serve as data
	if err != nil {
		t.Fatal(err)
	}
	st.Close()
	os.WriteFile(filepath.Join(dir, "agent.json"), []byte(`{"agent_name": "analyst", "version": "v1", "model_name": "scripted:turns.json",
		"system_text": "Answer from the database.", "tools": ["sql_query"],
		"connectors": {"sql": {"dsn": "shop.db", "max_rows": 10}}}`), 0o600)
	os.WriteFile(filepath.Join(dir, "turns.json"), []byte(`{"turns": [
		{"tool_calls": [{"name": "sql_query", "arguments": {"sql": "SELECT version FROM agentry_schema WHERE version = ?", "params": [1]}},
			{"name": "sql_query", "arguments": {"sql": "DELETE FROM agentry_schema"}}]},
		{"content": "Done."}]}`), 0o600)
	code, out, errs := runCLI(t, "run", filepath.Join(dir, "agent.json"), "--no-store", "--json", "-q")
	if code != 0 {
		t.Fatalf("exit %d\n%s", code, errs)
	}
	if !strings.Contains(out, `\"version\":1`) || !strings.Contains(out, `read_only`) {
		t.Errorf("result:\n%s", out)
	}
}

// TestUnknownConnectorTool: a tool a configured connector does not offer
// is named with what is known, the connector's tools among them, and
// why it is missing; a spec never runs without its tools.
func TestUnknownConnectorTool(t *testing.T) {
	dir := t.TempDir()
	st, err := openStore(t.Context(), filepath.Join(dir, "shop.db"))
	if err != nil {
		t.Fatal(err)
	}
	st.Close()
	path := filepath.Join(dir, "agent.json")
	os.WriteFile(path, []byte(`{"agent_name": "analyst", "version": "v1", "model_name": "scripted:turns.json",
		"system_text": "Answer from the database.", "tools": ["sql_query", "sql_exec"],
		"connectors": {"sql": {"dsn": "shop.db"}}}`), 0o600)
	code, _, errs := runCLI(t, "validate", path)
	for _, want := range []string{`tools[1]: unknown tool "sql_exec"`, "sql_query", "the sql connector's configuration (connectors.sql) does not turn it on"} {
		if code != 2 || !strings.Contains(errs, want) {
			t.Errorf("exit %d, want %q in\n%s", code, want, errs)
		}
	}
}
