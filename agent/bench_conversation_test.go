package agent

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/agentry/agentry/llm"
	"github.com/agentry/agentry/llm/scripted"
	"github.com/agentry/agentry/store"
)

// BenchmarkTurnInConversation: the reference workload alone, and the
// same after a conversation's history of 100 earlier exchanges (200
// messages, given with WithHistory: no store, as the floor runs).
func BenchmarkTurnInConversation(b *testing.B) {
	hist := chatHistory(100)
	turnsAndStart(b, []variant{
		{"alone", func() []RunOption { return nil }},
		{"conversation", func() []RunOption { return []RunOption{WithHistory(hist...)} }},
	})
}

// variant is a way to run the workload: its name, and the options of a
// run (made before the clock runs).
type variant struct {
	name string
	opts func() []RunOption
}

// turnsAndStart runs the reference workload at 2 and at 50 turns each
// iteration in every variant in turn (so that the machine's drift and
// the store's growth reach all alike), and reports for each what a turn
// costs (ns/turn-NAME: the 48 turns the longer run adds) apart from what
// a run pays once (ns/start-NAME: the 2-turn run less its two turns),
// where a conversation's history is read, copied into the transcript and
// looked at by the redactor.
func turnsAndStart(b *testing.B, variants []variant) {
	short, long := benchScriptN(b, 2), benchScriptN(b, 50)
	a := benchAgentN(b, long, 50)
	input := map[string]any{"task": "add"}
	ctx := context.Background()
	run := func(v variant, s *scripted.Script, turns int) time.Duration {
		b.StopTimer()
		o := append(v.opts(), WithSessionProvider(s.Model()))
		b.StartTimer()
		start := time.Now()
		res, err := a.Run(ctx, input, o...)
		if err != nil || res.Iterations != turns {
			b.Fatalf("%s: %v after %d turns", v.name, err, res.Iterations)
		}
		return time.Since(start)
	}
	b.ReportAllocs()
	two, fifty := make([]time.Duration, len(variants)), make([]time.Duration, len(variants))
	for b.Loop() {
		for i, v := range variants {
			two[i] += run(v, short, 2)
			fifty[i] += run(v, long, 50)
		}
	}
	for i, v := range variants {
		turn := float64((fifty[i] - two[i]).Nanoseconds()) / float64(b.N*48)
		b.ReportMetric(turn, "ns/turn-"+v.name)
		b.ReportMetric(float64(two[i].Nanoseconds())/float64(b.N)-2*turn, "ns/start-"+v.name)
	}
}

// chatHistory is n exchanges of a chat: a question and its answer each.
func chatHistory(n int) []llm.Message {
	var hist []llm.Message
	for i := range n {
		hist = append(hist, llm.Message{Role: llm.RoleUser, Content: fmt.Sprintf("Question %d: what is %d + %d?", i, i, i)},
			llm.Message{Role: llm.RoleAssistant, Content: fmt.Sprintf("It is %d.", 2*i)})
	}
	return hist
}

// BenchmarkStoredTurnInConversation: the same in stored runs on SQLite,
// alone and in a conversation of 100 earlier exchanges (a fresh fork of
// it each run, made before the clock runs), on one store.
func BenchmarkStoredTurnInConversation(b *testing.B) {
	ctx := context.Background()
	st := openStore(b, filepath.Join(b.TempDir(), "runs.db")).Store
	cs := st.(store.Conversations)
	chat, err := New(mustSpec(b, `{"agent_name": "bench", "version": "v1", "model_name": "m", "system_text": "Add numbers."}`),
		WithProvider(llm.ProviderFunc(func(context.Context, *llm.Request) (*llm.Response, error) {
			return &llm.Response{Content: "It is done."}, nil
		}), "func"))
	if err != nil {
		b.Fatal(err)
	}
	var last string
	for i := range 100 {
		res, err := chat.Run(ctx, map[string]any{"task": fmt.Sprintf("Question %d: what is %d + %d?", i, i, i)}, WithStore(st), WithConversation("long"))
		if err != nil {
			b.Fatal(err)
		}
		last = res.ID
	}
	forks := 0
	turnsAndStart(b, []variant{
		{"alone", func() []RunOption { return []RunOption{WithStore(st)} }},
		{"conversation", func() []RunOption {
			forks++
			id := fmt.Sprintf("fork-%d-%d", forks, time.Now().UnixNano())
			if err := cs.Fork(ctx, "long", last, store.Conversation{ID: id}); err != nil {
				b.Fatal(err)
			}
			return []RunOption{WithStore(st), WithConversation(id)}
		}},
	})
}

// BenchmarkConversationStart: a one-turn run that starts a conversation,
// and one that goes on with a conversation of 100 earlier runs, on
// SQLite: the time to run it, and the bytes of history it reads to
// start (one record, however many runs came before).
func BenchmarkConversationStart(b *testing.B) {
	ctx := context.Background()
	st := openStore(b, filepath.Join(b.TempDir(), "runs.db")).Store
	cs := st.(store.Conversations)
	model := llm.ProviderFunc(func(context.Context, *llm.Request) (*llm.Response, error) {
		return &llm.Response{Content: "Noted, and answered in a sentence or two."}, nil
	})
	a, err := New(mustSpec(b, `{"agent_name": "chat", "version": "v1", "model_name": "m", "system_text": "Chat."}`), WithProvider(model, "func"))
	if err != nil {
		b.Fatal(err)
	}
	for i := range 100 {
		if _, err := a.Run(ctx, map[string]any{"task": fmt.Sprintf("Message %d of a long conversation.", i)}, WithStore(st), WithConversation("long")); err != nil {
			b.Fatal(err)
		}
	}
	runs, _ := st.List(ctx, store.Filter{Conversation: "long", Limit: 1})
	for _, tc := range []struct {
		name string
		conv func(i int) string // the conversation of iteration i, made before it is timed
	}{
		{"first-run", func(i int) string { return fmt.Sprintf("new-%d-%d", i, time.Now().UnixNano()) }},
		{"after-100-runs", func(i int) string {
			id := fmt.Sprintf("fork-%d-%d", i, time.Now().UnixNano())
			if err := cs.Fork(ctx, "long", runs[0].ID, store.Conversation{ID: id}); err != nil {
				b.Fatal(err)
			}
			return id
		}},
	} {
		b.Run(tc.name, func(b *testing.B) {
			b.ReportAllocs()
			i := 0
			var read int
			for b.Loop() {
				b.StopTimer()
				id := tc.conv(i)
				if rec, _ := cs.History(ctx, id); rec != nil {
					read = len(rec.Data)
				}
				i++
				b.StartTimer()
				if _, err := a.Run(ctx, map[string]any{"task": "And now?"}, WithStore(st), WithConversation(id)); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(read), "history-B")
		})
	}
}
