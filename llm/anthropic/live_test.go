package anthropic

import (
	"testing"

	"github.com/agentry/agentry/internal/livetest"
)

// TestLive calls the real API; it runs only with ANTHROPIC_API_KEY set, never in CI.
func TestLive(t *testing.T) {
	livetest.ToolCall(t, New(Options{APIKey: livetest.Key(t, "ANTHROPIC_API_KEY")}), "claude-haiku-4-5")
}
