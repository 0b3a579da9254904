package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentry/agentry/internal/livetest"
)

// TestLiveQuickstart runs the quickstart agent against each vendor whose
// key is in the environment; never in CI.
func TestLiveQuickstart(t *testing.T) {
	for _, c := range liveModels {
		t.Run(c.model, func(t *testing.T) {
			livetest.Key(t, c.env)
			code, out, errs := run(t, "run", quickstart, "--input", "city=Lisbon", "--input", "days=3", "--model", c.model)
			if code != 0 || strings.TrimSpace(out) == "" || !strings.Contains(errs, "→ kv_set") {
				t.Errorf("exit %d\nstdout %s\nstderr %s", code, out, errs)
			}
		})
	}
}

// TestLiveReAct runs a ReAct agent (the text protocol, no native tool
// calling) against each vendor whose key is in the environment: the
// full loop with a real model; never in CI (TestReActOnEachVendor runs
// the same wire formats offline).
func TestLiveReAct(t *testing.T) {
	for _, c := range liveModels {
		t.Run(c.model, func(t *testing.T) {
			livetest.Key(t, c.env)
			spec := filepath.Join(t.TempDir(), "agent.json")
			os.WriteFile(spec, []byte(`{"agent_name": "keeper", "version": "v1", "mode": "react", "model_name": "`+c.model+`",
				"system_text": "You keep facts with the kv tools.", "tools": ["kv_set", "kv_get"], "limits": {"max_turns": 6},
				"user_text": "Save that the capital of France is Paris under the key capital, read it back with kv_get, then give the capital as your Final Answer."}`), 0o600)
			code, out, errs := run(t, "run", spec, "--no-store")
			if code != 0 || !strings.Contains(out, "Paris") || !strings.Contains(errs, "→ kv_set") || !strings.Contains(errs, "→ kv_get") {
				t.Errorf("exit %d\nstdout %s\nstderr %s", code, out, errs)
			}
		})
	}
}

// liveModels are the vendors' models the live tests run, each with the
// variable its key is in.
var liveModels = []struct{ env, model string }{
	{"OPENAI_API_KEY", "gpt-4.1-mini"},
	{"ANTHROPIC_API_KEY", "claude-haiku-4-5"},
	{"GEMINI_API_KEY", "gemini-2.5-flash"},
}
