package gemini

import (
	"testing"

	"github.com/agentry/agentry/internal/livetest"
)

// TestLive calls the real API; it runs only with GEMINI_API_KEY set, never in CI.
func TestLive(t *testing.T) {
	livetest.ToolCall(t, New(Options{APIKey: livetest.Key(t, "GEMINI_API_KEY")}), "gemini-2.5-flash")
}
