package agent_test

import (
	"context"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/agentry/agentry/agent"
	"github.com/agentry/agentry/llm/scripted"
	"github.com/agentry/agentry/spec"
	"github.com/agentry/agentry/tool"
)

type noArgs struct{}

// ledger notes when each call starts and ends, in order.
type ledger struct {
	mu     sync.Mutex
	events []string
}

func (l *ledger) note(s string) {
	l.mu.Lock()
	l.events = append(l.events, s)
	l.mu.Unlock()
}

// index is where s was last noted: in the last turn, for a tool called
// in several.
func (l *ledger) index(s string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	for i := len(l.events) - 1; i >= 0; i-- {
		if l.events[i] == s {
			return i
		}
	}
	return -1
}

// hinted is a tool that notes its start and end and returns hints.
func hinted(t *testing.T, l *ledger, name string, hints map[string]any, opts ...tool.Option) tool.Tool {
	t.Helper()
	tl, err := tool.Func(name, "A tool.", func(context.Context, noArgs) (map[string]any, error) {
		l.note(name + " start")
		defer l.note(name + " end")
		out := map[string]any{"tool": name}
		if hints != nil {
			out[tool.HintsKey] = hints
		}
		return out, nil
	}, append(opts, tool.WithIdempotency(tool.Safe))...)
	if err != nil {
		t.Fatal(err)
	}
	return tl
}

func calls(names ...string) scripted.Turn {
	var tc []scripted.ToolCall
	for _, n := range names {
		tc = append(tc, scripted.ToolCall{Name: n, Arguments: noArgs{}})
	}
	return scripted.Turn{ToolCalls: tc}
}

// TestScheduleByHints: the calls of one turn run in the order the
// Noema spec's AgentHints ask. A call whose tool depends on another tool
// of the turn (declared by the tool, or by its last result's hints) runs
// after that call, not beside it, and its step says after what and why;
// the rest run by their tools' last estimated impact, highest first;
// the steps are in the order run, the transcript in the order asked.
func TestScheduleByHints(t *testing.T) {
	for _, tc := range []struct {
		name     string
		tools    func(*ledger) []tool.Tool
		turns    []scripted.Turn
		before   [][2]string // each pair: the first ends before the second starts
		steps    []string    // the last turn's steps, in order
		afterWhy string      // in the After of the last turn's last step
		parallel int
	}{
		{"declared by the tool", func(l *ledger) []tool.Tool {
			return []tool.Tool{hinted(t, l, "lookup", nil), hinted(t, l, "refund", nil, tool.WithDependsOn("lookup"))}
		}, []scripted.Turn{calls("refund", "lookup")}, [][2]string{{"lookup end", "refund start"}},
			[]string{"lookup", "refund"}, "refund depends on it (the tool declares it)", 4},
		{"by a result's hints", func(l *ledger) []tool.Tool {
			return []tool.Tool{hinted(t, l, "lookup", nil), hinted(t, l, "refund", map[string]any{"dependencies": []string{"lookup"}})}
		}, []scripted.Turn{calls("refund"), calls("refund", "lookup")}, [][2]string{{"lookup end", "refund start"}},
			[]string{"lookup", "refund"}, "its last result's hints", 4},
		{"by estimated impact", func(l *ledger) []tool.Tool {
			return []tool.Tool{hinted(t, l, "low", map[string]any{"estimated_impact": 0.2}), hinted(t, l, "high", map[string]any{"estimated_impact": 0.9}),
				hinted(t, l, "unrated", nil)}
		}, []scripted.Turn{calls("low", "high"), calls("unrated", "low", "high")}, [][2]string{{"high end", "low start"}, {"low end", "unrated start"}},
			[]string{"high", "low", "unrated"}, "", 1},
		{"a cycle runs as asked", func(l *ledger) []tool.Tool {
			return []tool.Tool{hinted(t, l, "a", nil, tool.WithDependsOn("b")), hinted(t, l, "b", nil, tool.WithDependsOn("a"))}
		}, []scripted.Turn{calls("a", "b")}, nil, []string{"a", "b"}, "a dependency cycle", 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l := &ledger{}
			script, err := scripted.New("m", append(tc.turns, scripted.Turn{Content: "Done."})...)
			if err != nil {
				t.Fatal(err)
			}
			res := runScripted(t, &spec.Spec{AgentName: "s", Version: "v1", SystemText: "x", Limits: spec.Limits{MaxParallelTools: tc.parallel}},
				script, agent.Use(tc.tools(l)...))
			for _, p := range tc.before {
				if i, j := l.index(p[0]), l.index(p[1]); i < 0 || j < 0 || i > j {
					t.Errorf("%s should come before %s: %v", p[0], p[1], l.events)
				}
			}
			last := res.Steps[len(res.Steps)-len(tc.steps):]
			var got []string
			for _, s := range last {
				got = append(got, s.Action.Tool)
			}
			if !slices.Equal(got, tc.steps) {
				t.Errorf("the last turn's steps %v, want %v", got, tc.steps)
			}
			if a := last[len(last)-1].Action.After; !strings.Contains(a, tc.afterWhy) || (tc.afterWhy == "") != (a == "") {
				t.Errorf("the last step's After %q, want %q", a, tc.afterWhy)
			}
			// The transcript keeps the model's order of the last turn.
			var asked []string
			for _, m := range res.Messages[len(res.Messages)-len(tc.steps)-1 : len(res.Messages)-1] {
				asked = append(asked, m.Name)
			}
			var want []string
			for _, c := range tc.turns[len(tc.turns)-1].ToolCalls {
				want = append(want, c.Name)
			}
			if !slices.Equal(asked, want) {
				t.Errorf("the transcript's tool results %v, want the order asked %v", asked, want)
			}
		})
	}
}

// TestAlternativesByImpact: the alternatives of the reasoning are in
// the order of their estimated impact, highest first, ties as given.
func TestAlternativesByImpact(t *testing.T) {
	l := &ledger{}
	alts := []map[string]any{
		{"approach": "wait", "confidence": 0.5, "estimated_impact": 0.1},
		{"approach": "refund", "confidence": 0.5, "estimated_impact": 0.8},
		{"approach": "replace", "confidence": 0.5, "estimated_impact": 0.8},
		{"approach": "ask", "confidence": 0.5},
	}
	script, _ := scripted.New("m", calls("advise"), scripted.Turn{Content: "Done."})
	res := runScripted(t, &spec.Spec{AgentName: "s", Version: "v1", SystemText: "x"}, script,
		agent.Use(hinted(t, l, "advise", map[string]any{"alternatives": alts})))
	var got []string
	for _, alt := range res.Alternatives {
		got = append(got, alt.Approach)
	}
	if want := []string{"refund", "replace", "wait", "ask"}; !slices.Equal(got, want) {
		t.Errorf("alternatives %v, want %v", got, want)
	}
}

// runScripted runs an agent of sp on script, with opts, to its Result.
func runScripted(t *testing.T, sp *spec.Spec, script *scripted.Script, opts ...agent.Option) *agent.Result {
	t.Helper()
	a, err := agent.New(sp, append([]agent.Option{agent.WithProvider(script.Model(), "scripted")}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	res, err := a.Run(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	return res
}
