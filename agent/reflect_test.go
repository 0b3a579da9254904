package agent_test

import (
	"context"
	"testing"

	"github.com/agentry/agentry/agent"
	"github.com/agentry/agentry/llm/scripted"
	"github.com/agentry/agentry/memory"
	_ "github.com/agentry/agentry/memory/inmem"
	"github.com/agentry/agentry/spec"
	"github.com/agentry/agentry/tool"
)

// TestReflector: the step after a turn's tools ran and before the next
// plan sees the turn's results and what budget is left, keeps state in
// the run's scratchpad, writes memory at that turn (listed in the
// Result's memory_deltas), and ends the run when it has enough, without
// another model call.
func TestReflector(t *testing.T) {
	lookup := lookupTool()
	script, _ := scripted.New("m", calls("lookup"), calls("lookup"), scripted.Turn{Content: "never asked"})
	type seen struct {
		turn, results, turnsLeft, callsLeft int
	}
	var saw []seen
	var stored []int
	res := runScripted(t, &spec.Spec{AgentName: "r", Version: "v1", SystemText: "Look up.",
		Limits: spec.Limits{MaxTurns: 5, MaxToolCalls: 10},
		Memory: &spec.Memory{Backend: "mem:", Stream: "notes"}},
		script, agent.Use(lookup),
		agent.WithReflector(func(ctx context.Context, t *agent.Turn) (*agent.Final, error) {
			left := t.Remaining()
			saw = append(saw, seen{t.Number(), len(t.Results()), left.MaxTurns, left.MaxToolCalls})
			facts, _ := t.Scratch()["facts"].(int)
			t.Scratch()["facts"] = facts + len(t.Results())
			if err := t.Remember(ctx, "fact", t.Results()[0].Observation); err != nil {
				return nil, err
			}
			m, stream := t.Memory()
			entries, err := m.Read(ctx, stream, memory.ReadOptions{})
			if err != nil {
				return nil, err
			}
			stored = append(stored, len(entries))
			if facts+len(t.Results()) >= 2 {
				return &agent.Final{Text: "Two facts are enough."}, nil
			}
			return nil, nil
		}))
	if res.Result != "Two facts are enough." || len(res.ModelCalls) != 2 {
		t.Errorf("result %v after %d model calls; want the reflector's answer after 2", res.Result, len(res.ModelCalls))
	}
	want := []seen{{2, 1, 4, 9}, {3, 1, 3, 8}}
	if len(saw) != len(want) || saw[0] != want[0] || saw[1] != want[1] {
		t.Errorf("the reflector saw %v, want %v", saw, want)
	}
	if len(res.MemoryDeltas) != 2 || res.MemoryDeltas[0].Kind != "fact" || res.MemoryDeltas[1].Text != `"a fact"` {
		t.Errorf("memory deltas %+v", res.MemoryDeltas)
	}
	if len(stored) != 2 || stored[0] != 1 || stored[1] != 2 {
		t.Errorf("entries read back from the run's memory after each write: %v", stored)
	}
}

// TestReflectorOncePerToolTurn: a turn without tools (here, an answer
// the output schema refuses, corrected the next turn) leaves the earlier
// results in place: the reflector does not reflect on them again.
func TestReflectorOncePerToolTurn(t *testing.T) {
	lookup := lookupTool()
	script, _ := scripted.New("m", calls("lookup"), scripted.Turn{Content: "not json"}, scripted.Turn{Content: `{"fact": "a fact"}`})
	reflections := 0
	res := runScripted(t, &spec.Spec{AgentName: "r", Version: "v1", SystemText: "Look up.",
		OutputSchema: []byte(`{"type": "object", "properties": {"fact": {"type": "string"}}, "required": ["fact"]}`)},
		script, agent.Use(lookup),
		agent.WithReflector(func(context.Context, *agent.Turn) (*agent.Final, error) { reflections++; return nil, nil }))
	if res.Iterations != 3 {
		t.Fatalf("%d turns", res.Iterations)
	}
	if reflections != 1 {
		t.Errorf("%d reflections on one turn's tools", reflections)
	}
}

// lookupTool is a safe tool that always finds "a fact".
func lookupTool() tool.Tool {
	return tool.Must(tool.Func("lookup", "Looks a fact up.", func(context.Context, noArgs) (string, error) { return "a fact", nil },
		tool.WithIdempotency(tool.Safe)))
}
