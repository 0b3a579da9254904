package main

import (
	"os"
	"path/filepath"
	"strings"
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

// TestModelSelection: a spec picks its model per request among its own
// and its fallbacks, without Go: the cheapest, or the first under a
// price ceiling; a ceiling no model is under is refused before the run.
func TestModelSelection(t *testing.T) {
	dir := t.TempDir()
	for name, model := range map[string]string{"big.json": "gpt-4.1", "small.json": "gpt-4.1-mini"} {
		os.WriteFile(filepath.Join(dir, name), []byte(`{"model": "`+model+`", "turns": [{"content": "Hi.", "usage": {"prompt_tokens": 10, "completion_tokens": 2}}]}`), 0o600)
	}
	for _, tc := range []struct {
		name, selection string
		code            int
		want            string // the model that answered, or the error
	}{
		{"priority", `{}`, 0, `"model":"gpt-4.1"`},
		{"cheapest", `{"strategy": "cheapest"}`, 0, `"model":"gpt-4.1-mini"`},
		{"under a ceiling", `{"max_completion_price": 2}`, 0, `"model":"gpt-4.1-mini"`},
		{"no model under the ceiling", `{"max_completion_price": 1}`, 2, "every model is above the price ceiling"},
		{"an unknown strategy", `{"strategy": "cheap"}`, 2, `model_selection.strategy "cheap"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			spec := filepath.Join(dir, "agent.json")
			os.WriteFile(spec, []byte(`{"agent_name": "a", "version": "v1", "model_name": "scripted:big.json",
				"fallback_models": [{"model_name": "scripted:small.json"}], "model_selection": `+tc.selection+`, "system_text": "Greet."}`), 0o600)
			code, out, errs := run(t, "run", spec, "--no-store", "-q", "--json")
			if code != tc.code || !strings.Contains(strings.ReplaceAll(out, " ", "")+errs, tc.want) {
				t.Errorf("exit %d (want %d), want %q in\n%s%s", code, tc.code, tc.want, out, errs)
			}
		})
	}
}
