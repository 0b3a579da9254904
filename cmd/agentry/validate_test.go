package main

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentry/agentry/store"
)

// TestFailFast: a model whose provider has no API key is found before a
// run starts: run exits 2 and stores nothing, serve does not start, and
// validate, which checks specs where no key need be, passes.
func TestFailFast(t *testing.T) {
	t.Setenv("OPENAI_API_KEY", "")
	dir := t.TempDir()
	os.MkdirAll(filepath.Join(dir, "agents", "helper"), 0o755)
	path := filepath.Join(dir, "agents", "helper", "v1.json")
	os.WriteFile(path, []byte(`{"agent_name": "helper", "version": "v1", "model_name": "gpt-4.1-mini", "system_text": "Help."}`), 0o600)
	db := filepath.Join(dir, "runs.db")
	code, _, errs := run(t, "run", path, "--db", db)
	if code != 2 || !strings.Contains(errs, "no API key: set OPENAI_API_KEY") {
		t.Errorf("run without a key: exit %d\n%s", code, errs)
	}
	st, err := store.Open(context.Background(), db)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if runs, err := st.List(context.Background(), store.Filter{}); err != nil || len(runs) != 0 {
		t.Errorf("a run that could not start is stored: %v, %v", runs, err)
	}
	if code, _, errs := run(t, "serve", "--agents", filepath.Join(dir, "agents"), "--db", db, "--addr", "127.0.0.1:0"); code != 2 ||
		!strings.Contains(errs, "agent helper") || !strings.Contains(errs, "OPENAI_API_KEY") {
		t.Errorf("serve without a key: exit %d\n%s", code, errs)
	}
	if code, out, errs := run(t, "validate", path); code != 0 || !strings.Contains(out, "✓") {
		t.Errorf("validate without a key: exit %d\n%s%s", code, out, errs)
	}
}

// TestModelUnlistedFlag: a --model its provider's catalog lacks is
// refused as misspelt, unless --model-unlisted says it is meant or
// OPENAI_BASE_URL points at a server of one's own; then the run goes on
// to what it needs next (here the key, absent: still before anything is
// stored).
func TestModelUnlistedFlag(t *testing.T) {
	quickstart := filepath.Join("..", "..", "examples", "quickstart", "agent.json")
	for _, tc := range []struct {
		name, baseURL string
		args          []string
		want          string
	}{
		{"refused as misspelt", "", []string{"--model", "openai:gpt-9-turbo"}, `openai's catalog does not have this model`},
		{"unlisted on purpose", "", []string{"--model", "openai:gpt-9-turbo", "--model-unlisted"}, "no API key"},
		{"a server of one's own", "http://127.0.0.1:9/v1", []string{"--model", "openai:llama3"}, "no API key"},
		{"the flag alone", "", []string{"--model-unlisted"}, "--model-unlisted: give --model"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv("OPENAI_API_KEY", "")
			t.Setenv("OPENAI_BASE_URL", tc.baseURL)
			args := append([]string{"run", quickstart, "--input", "city=Lisbon", "--input", "days=3", "--no-store"}, tc.args...)
			if code, _, errs := run(t, args...); code != 2 || !strings.Contains(errs, tc.want) {
				t.Errorf("exit %d, want 2 and %q:\n%s", code, tc.want, errs)
			}
		})
	}
}
