package agent

import (
	"context"
	"reflect"
	"runtime"
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
// unlike a time. A run in a conversation of 100 earlier exchanges makes
// the same per turn, and the bytes of a turn do not grow with the
// history: it is copied into the transcript once, with room for the
// run's own messages, not again as they come.
func TestAllocationsPerTurn(t *testing.T) {
	ctx := context.Background()
	input := map[string]any{"task": "add"}
	measure := func(turns int, opt RunOption) (allocs, bytes float64) {
		s := benchScriptN(t, turns)
		a := benchAgent(t, s)
		run := func() {
			res, err := a.Run(ctx, input, opt, WithSessionProvider(s.Model()))
			if err != nil || res.Iterations != turns {
				t.Fatalf("%v after %d turns", err, res.Iterations)
			}
		}
		allocs = testing.AllocsPerRun(50, run)
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		for range 50 {
			run()
		}
		runtime.ReadMemStats(&after)
		return allocs, float64(after.TotalAlloc-before.TotalAlloc) / 50
	}
	var aloneBytes float64
	for _, tc := range []struct {
		name string
		opt  RunOption
		one  float64 // the one-turn run's budget
	}{
		{"alone", func(*runConfig) {}, oneTurnAllocs},
		{"in a conversation", WithHistory(chatHistory(100)...), oneTurnAllocs + 3}, // the run's extra options, its notes, the transcript with the history
	} {
		t.Run(tc.name, func(t *testing.T) {
			one, _ := measure(1, tc.opt)
			two, twoBytes := measure(2, tc.opt)
			ten, tenBytes := measure(10, tc.opt)
			perTurn, turnBytes := (ten-two)/8, (tenBytes-twoBytes)/8
			t.Logf("one-turn run %.0f allocations, two-turn run %.0f, ten-turn run %.0f, %.1f per turn (%.0f bytes)", one, two, ten, perTurn, turnBytes)
			if perTurn > perTurnAllocs+raceAllocSlack {
				t.Errorf("%.1f allocations per turn, the budget is %d", perTurn, perTurnAllocs)
			}
			if one > tc.one+raceAllocSlack {
				t.Errorf("a one-turn run makes %.0f allocations, the budget is %.0f", one, tc.one)
			}
			if aloneBytes == 0 {
				aloneBytes = turnBytes
			} else if turnBytes > 1.1*aloneBytes {
				t.Errorf("a turn allocates %.0f bytes, %.0f alone: the history is copied as the run goes", turnBytes, aloneBytes)
			}
		})
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
