package agent

import (
	"context"
	"encoding/json"
	"fmt"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentry/agentry/event"
	"github.com/agentry/agentry/llm"
	"github.com/agentry/agentry/llm/scripted"
	"github.com/agentry/agentry/tool"
)

// The reference workload: ten turns, nine of which
// call add(a, b) with JSON arguments, then a final answer, on the scripted
// provider with zero latency.

func benchScript(b testing.TB) *scripted.Script { return benchScriptN(b, 10) }

// benchScriptN is the workload with n turns: n-1 calls of add, an answer.
func benchScriptN(b testing.TB, n int) *scripted.Script {
	var turns []string
	for i := range n - 1 {
		turns = append(turns, fmt.Sprintf(`{"tool_calls": [{"name": "add", "arguments": {"a": %d, "b": %d}}], "usage": {"prompt_tokens": 20, "completion_tokens": 8}}`, i, i+1))
	}
	turns = append(turns, `{"content": "The sums are done.", "usage": {"prompt_tokens": 20, "completion_tokens": 5}}`)
	s, err := scripted.Parse("bench", []byte(`{"turns": [`+strings.Join(turns, ",")+`]}`))
	if err != nil {
		b.Fatal(err)
	}
	return s
}

func benchAgent(b testing.TB, s *scripted.Script) *Agent { return benchAgentN(b, s, 10) }

// benchAgentN is the workload's agent with max_turns n.
func benchAgentN(b testing.TB, s *scripted.Script, n int) *Agent {
	add := tool.Must(tool.Func("add", "Add two integers.", func(_ context.Context, in addArgs) (int, error) {
		return in.A + in.B, nil
	}, tool.WithIdempotency(tool.Safe)))
	reg, _ := tool.NewRegistry(add)
	spec := mustSpec(b, `{"agent_name": "bench", "version": "v1", "model_name": "scripted:bench", "system_text": "Add numbers.",
		"tools": ["add"], "limits": {"max_turns": `+strconv.Itoa(n)+`}}`)
	a, err := New(spec, WithProvider(s.Model(), "scripted"), WithTools(reg))
	if err != nil {
		b.Fatal(err)
	}
	return a
}

func BenchmarkLoop10Turns(b *testing.B) {
	s := benchScript(b)
	a := benchAgent(b, s)
	input := map[string]any{"task": "add"}
	ctx := context.Background()
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	b.ReportAllocs()
	b.ResetTimer()
	start := time.Now()
	for b.Loop() {
		res, err := a.Run(ctx, input, WithSessionProvider(s.Model()))
		if err != nil || res.Iterations != 10 {
			b.Fatalf("%v after %d turns", err, res.Iterations)
		}
	}
	elapsed := time.Since(start)
	b.StopTimer()
	runtime.ReadMemStats(&after)
	turns := float64(b.N * 10)
	b.ReportMetric(float64(elapsed.Nanoseconds())/turns, "ns/turn")
	b.ReportMetric(float64(after.Mallocs-before.Mallocs)/turns, "allocs/turn")
	b.ReportMetric(float64(after.TotalAlloc-before.TotalAlloc)/turns, "B/turn")
}

// gate pauses every session at its sixth model call until released.
type gate struct {
	next    llm.Provider
	calls   int
	arrived *sync.WaitGroup
	release chan struct{}
}

func (g *gate) Generate(ctx context.Context, req *llm.Request) (*llm.Response, error) {
	g.calls++
	if g.calls == 6 {
		g.arrived.Done()
		<-g.release
	}
	return g.next.Generate(ctx, req)
}

func BenchmarkConcurrentSessions(b *testing.B) {
	const sessions = 1000
	s := benchScript(b)
	a := benchAgent(b, s)
	input := map[string]any{"task": "add"}
	var perSession float64
	b.ReportAllocs()
	for b.Loop() {
		var arrived, done sync.WaitGroup
		release := make(chan struct{})
		arrived.Add(sessions)
		runtime.GC()
		var before, paused runtime.MemStats
		runtime.ReadMemStats(&before)
		for range sessions {
			done.Add(1)
			go func() {
				defer done.Done()
				g := &gate{next: s.Model(), arrived: &arrived, release: release}
				if _, err := a.Run(context.Background(), input, WithSessionProvider(g)); err != nil {
					b.Error(err)
				}
			}()
		}
		arrived.Wait() // every session is paused half-way, holding its state
		runtime.GC()
		runtime.ReadMemStats(&paused)
		close(release)
		done.Wait()
		heap := float64(paused.HeapAlloc) - float64(before.HeapAlloc)
		stack := float64(paused.StackInuse) - float64(before.StackInuse)
		perSession = (heap + stack) / sessions
		b.ReportMetric(heap/sessions, "heapB/session")
	}
	b.ReportMetric(perSession, "B/session")
}

// BenchmarkLoop1Turn is the shortest run: one model call that answers.
// What it costs is the run's own set-up and result.
func BenchmarkLoop1Turn(b *testing.B) {
	s := benchScriptN(b, 1)
	a := benchAgent(b, s)
	input := map[string]any{"task": "add"}
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		if _, err := a.Run(ctx, input, WithSessionProvider(s.Model())); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkHandWrittenLoop1Turn is the floor of BenchmarkLoop1Turn.
func BenchmarkHandWrittenLoop1Turn(b *testing.B) {
	s := benchScriptN(b, 1)
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		m := s.Model()
		msgs := []llm.Message{{Role: llm.RoleUser, Content: "add"}}
		resp, err := m.Generate(ctx, &llm.Request{Messages: msgs})
		if err != nil || resp.Content == "" {
			b.Fatal(err)
		}
		msgs = append(msgs, llm.Message{Role: llm.RoleAssistant, Content: resp.Content})
		_ = msgs
	}
}

// BenchmarkHandWrittenLoop is the floor agentry is measured against: the
// same workload as a minimal loop with a messages slice, map dispatch and
// encoding/json arguments, and no bookkeeping at all.
func BenchmarkHandWrittenLoop(b *testing.B) {
	s := benchScript(b)
	type msg struct {
		role, content string
		calls         []llm.ToolCall
	}
	tools := map[string]func(json.RawMessage) (string, error){
		"add": func(raw json.RawMessage) (string, error) {
			var in addArgs
			if err := json.Unmarshal(raw, &in); err != nil {
				return "", err
			}
			return strconv.Itoa(in.A + in.B), nil
		},
	}
	ctx := context.Background()
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	b.ReportAllocs()
	start := time.Now()
	for b.Loop() {
		m := s.Model()
		msgs := []msg{{role: "user", content: "add"}}
		for {
			resp, err := m.Generate(ctx, &llm.Request{})
			if err != nil {
				b.Fatal(err)
			}
			msgs = append(msgs, msg{role: "assistant", content: resp.Content, calls: resp.ToolCalls})
			if len(resp.ToolCalls) == 0 {
				break
			}
			for _, c := range resp.ToolCalls {
				out, err := tools[c.Name](c.Arguments)
				if err != nil {
					b.Fatal(err)
				}
				msgs = append(msgs, msg{role: "tool", content: out})
			}
		}
	}
	elapsed := time.Since(start)
	runtime.ReadMemStats(&after)
	turns := float64(b.N * 10)
	b.ReportMetric(float64(elapsed.Nanoseconds())/turns, "ns/turn")
	b.ReportMetric(float64(after.Mallocs-before.Mallocs)/turns, "allocs/turn")
	b.ReportMetric(float64(after.TotalAlloc-before.TotalAlloc)/turns, "B/turn")
}

// BenchmarkLoop10TurnsObserved is the reference workload with one event
// subscriber, to show what listening costs: one that takes every event
// (so the model calls stream, for content_chunk), and one that takes all
// but content_chunk, as a sink of tool calls and run ends would.
func BenchmarkLoop10TurnsObserved(b *testing.B) {
	noChunks := []event.Type{event.RunStart, event.TurnStart, event.Thinking, event.ToolCallStart, event.ToolCallEnd,
		event.PolicyDecision, event.Retry, event.TurnEnd, event.Error, event.RunEnd}
	for _, bb := range []struct {
		name string
		opts []event.Option
	}{{"every", nil}, {"no_chunks", []event.Option{event.Types(noChunks...)}}} {
		b.Run(bb.name, func(b *testing.B) {
			s := benchScript(b)
			a := benchAgent(b, s)
			input := map[string]any{"task": "add"}
			ctx := context.Background()
			events := 0
			b.ReportAllocs()
			start := time.Now()
			for b.Loop() {
				if _, err := a.Run(ctx, input, WithSessionProvider(s.Model()), WithEvents(func(event.Event) { events++ }, bb.opts...)); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(time.Since(start).Nanoseconds())/float64(b.N*10), "ns/turn")
			b.ReportMetric(float64(events)/float64(b.N), "events/run")
		})
	}
}
