package agent

import (
	"context"
	"reflect"
	"testing"
)

// perTurnAllocs is the allocation budget of one turn of the reference
// workload (a model call and one tool call), with nobody listening. It
// covers the call's bookkeeping, its deadline, its output and the step
// it records; lower it when a change saves an allocation, never raise it
// without saying why in docs/performance.md.
const perTurnAllocs = 5

// oneTurnAllocs is the budget of a whole one-turn run: the session, its
// contexts, the prompt, the model call, its compact record and the
// Result.
const oneTurnAllocs = 22

// TestAllocationsPerTurn holds the loop to its budget: the allocations of
// a ten-turn run less those of a two-turn run, per added turn (what a
// run with tools makes once, its steps' records and outputs, is not a
// turn's), and a one-turn run. An allocation count is deterministic,
// unlike a time.
func TestAllocationsPerTurn(t *testing.T) {
	ctx := context.Background()
	input := map[string]any{"task": "add"}
	allocs := func(turns int) float64 {
		s := benchScriptN(t, turns)
		a := benchAgent(t, s)
		return testing.AllocsPerRun(50, func() {
			res, err := a.Run(ctx, input, WithSessionProvider(s.Model()))
			if err != nil || res.Iterations != turns {
				t.Fatalf("%v after %d turns", err, res.Iterations)
			}
		})
	}
	one, two, ten := allocs(1), allocs(2), allocs(10)
	perTurn := (ten - two) / 8
	t.Logf("one-turn run %.0f allocations, two-turn run %.0f, ten-turn run %.0f, %.1f per turn", one, two, ten, perTurn)
	if perTurn > perTurnAllocs+raceAllocSlack {
		t.Errorf("%.1f allocations per turn, the budget is %d", perTurn, perTurnAllocs)
	}
	if one > oneTurnAllocs+raceAllocSlack {
		t.Errorf("a one-turn run makes %.0f allocations, the budget is %d", one, oneTurnAllocs)
	}
}

// TestSessionSize keeps a Session, the largest object a paused run
// holds, in the allocator's 1,408-byte size class. An object with
// pointers above 512 bytes carries an 8-byte header of its type, so the
// budget is 1,400 bytes: one field more and every paused session costs
// 128 bytes more. What few runs use lives behind a pointer made when
// used (the reasoning, sub-runs' roll-up, a price of another model).
func TestSessionSize(t *testing.T) {
	if n := reflect.TypeOf(Session{}).Size(); n > 1408-8 {
		t.Errorf("a Session is %d bytes; the budget is 1,400 (docs/performance.md)", n)
	}
}
