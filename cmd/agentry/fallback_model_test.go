package main

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/agentry/agentry/internal/wiretest"
)

// TestModelNamesAFallback: --model naming one of the spec's own
// fallback_models runs it as the spec describes it, at its own base_url
// (a server, or a Temporal worker, given only the name builds the same
// agent); another model keeps the spec's base_url.
func TestModelNamesAFallback(t *testing.T) {
	t.Setenv("OPENAI_API_KEY", "sk-test-abcdefghijklmnopqrstuvwxyz0123")
	answer := wiretest.Reply{Body: `{"id": "c1", "object": "chat.completion", "created": 1, "model": "gpt-4.1",
		"choices": [{"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": "Hi."}}],
		"usage": {"prompt_tokens": 10, "completion_tokens": 2, "total_tokens": 12}}`}
	primary, fallback := wiretest.New(t, answer, answer), wiretest.New(t, answer)
	spec := filepath.Join(t.TempDir(), "agent.json")
	os.WriteFile(spec, []byte(`{"agent_name": "a", "version": "v1", "model_name": "gpt-4.1-mini", "base_url": "`+primary.URL+`",
		"fallback_models": [{"model_name": "gpt-4.1", "base_url": "`+fallback.URL+`"}], "system_text": "Greet."}`), 0o600)
	for _, tc := range []struct {
		model           string
		primary, fellTo int
	}{
		{"gpt-4.1", 0, 1},      // the fallback, at its own host
		{"gpt-4.1-nano", 1, 1}, // another model, at the spec's host
	} {
		if code, out, errs := run(t, "run", spec, "--no-store", "-q", "--json", "--model", tc.model); code != 0 {
			t.Fatalf("--model %s: exit %d\n%s\n%s", tc.model, code, out, errs)
		}
		if p, f := len(primary.Requests()), len(fallback.Requests()); p != tc.primary || f != tc.fellTo {
			t.Errorf("--model %s: the spec's host saw %d requests, the fallback's %d; want %d and %d", tc.model, p, f, tc.primary, tc.fellTo)
		}
	}
}
