package gemini

import (
	"testing"

	"go.uber.org/goleak"
)

// The genai SDK starts an opencensus worker at init; it is not ours.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m, goleak.IgnoreTopFunction("go.opencensus.io/stats/view.(*worker).start"))
}
