package openai

import (
	"testing"

	"github.com/agentry/agentry/internal/livetest"
)

// TestLive calls the real API; it runs only with OPENAI_API_KEY set, never in CI.
func TestLive(t *testing.T) {
	livetest.ToolCall(t, New(Options{APIKey: livetest.Key(t, "OPENAI_API_KEY")}), "gpt-4.1-mini")
}
