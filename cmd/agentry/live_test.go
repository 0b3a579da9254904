package main

import (
	"strings"
	"testing"

	"github.com/agentry/agentry/internal/livetest"
)

// TestLiveQuickstart runs the quickstart agent against each vendor whose
// key is in the environment; never in CI.
func TestLiveQuickstart(t *testing.T) {
	for _, c := range []struct{ env, model string }{
		{"OPENAI_API_KEY", "gpt-4.1-mini"},
		{"ANTHROPIC_API_KEY", "claude-haiku-4-5"},
		{"GEMINI_API_KEY", "gemini-2.5-flash"},
	} {
		t.Run(c.model, func(t *testing.T) {
			livetest.Key(t, c.env)
			code, out, errs := run(t, "run", quickstart, "--input", "city=Lisbon", "--input", "days=3", "--model", c.model)
			if code != 0 || strings.TrimSpace(out) == "" || !strings.Contains(errs, "→ kv_set") {
				t.Errorf("exit %d\nstdout %s\nstderr %s", code, out, errs)
			}
		})
	}
}
