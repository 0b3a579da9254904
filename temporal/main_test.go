package temporal

import (
	"os"
	"testing"

	"go.temporal.io/sdk/worker"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	// No workflow stays cached between its tasks: each task replays the
	// history from its start, so every test of the package checks that
	// the workflow is deterministic, and that nothing it emits (spans)
	// is emitted again on replay.
	worker.SetStickyWorkflowCacheSize(0)
	if os.Getenv("AGENTRY_TEMPORAL_NOLEAK") == "" {
		goleak.VerifyTestMain(m, goleak.IgnoreAnyFunction("go.opencensus.io/stats/view.(*worker).start"))
		return
	}
	os.Exit(m.Run())
}
