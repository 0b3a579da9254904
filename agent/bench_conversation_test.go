package agent

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/agentry/agentry/llm"
	"github.com/agentry/agentry/store"
)

// BenchmarkTurnInConversation: the reference workload's ten turns alone,
// and the same turns after a conversation's history of 100 earlier
// exchanges (200 messages, given with WithHistory: no store, as the
// floor runs): what a turn costs beyond the messages the model is sent.
func BenchmarkTurnInConversation(b *testing.B) {
	var hist []llm.Message
	for i := range 100 {
		hist = append(hist, llm.Message{Role: llm.RoleUser, Content: fmt.Sprintf("Question %d: what is %d + %d?", i, i, i)},
			llm.Message{Role: llm.RoleAssistant, Content: fmt.Sprintf("It is %d.", 2*i)})
	}
	for _, tc := range []struct {
		name string
		more []RunOption
	}{{"alone", nil}, {"after-100-runs", []RunOption{WithHistory(hist...)}}} {
		b.Run(tc.name, func(b *testing.B) {
			s := benchScript(b)
			a := benchAgent(b, s)
			input := map[string]any{"task": "add"}
			ctx := context.Background()
			b.ReportAllocs()
			start := time.Now()
			for b.Loop() {
				res, err := a.Run(ctx, input, append([]RunOption{WithSessionProvider(s.Model())}, tc.more...)...)
				if err != nil || res.Iterations != 10 {
					b.Fatalf("%v after %d turns", err, res.Iterations)
				}
			}
			b.ReportMetric(float64(time.Since(start).Nanoseconds())/float64(b.N*10), "ns/turn")
		})
	}
}

// BenchmarkStoredTurnInConversation: the reference workload's ten turns
// in a stored run alone, and in a stored run of a conversation of 100
// earlier exchanges (200 messages; a fresh fork of it each time), on
// SQLite.
func BenchmarkStoredTurnInConversation(b *testing.B) {
	ctx := context.Background()
	st := openStore(b, filepath.Join(b.TempDir(), "runs.db")).Store
	cs := st.(store.Conversations)
	s := benchScript(b)
	a := benchAgent(b, s)
	input := map[string]any{"task": "add"}
	// 100 exchanges of a chat before: a question and its answer each.
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
	for _, tc := range []struct {
		name string
		conv func(i int) string
	}{
		{"alone", func(int) string { return "" }},
		{"after-100-runs", func(i int) string {
			id := fmt.Sprintf("fork-%d-%d", i, time.Now().UnixNano())
			if err := cs.Fork(ctx, "long", last, store.Conversation{ID: id}); err != nil {
				b.Fatal(err)
			}
			return id
		}},
	} {
		b.Run(tc.name, func(b *testing.B) {
			b.ReportAllocs()
			var elapsed time.Duration
			i := 0
			for b.Loop() {
				b.StopTimer()
				opts := []RunOption{WithStore(st), WithSessionProvider(s.Model())}
				if id := tc.conv(i); id != "" {
					opts = append(opts, WithConversation(id))
				}
				i++
				b.StartTimer()
				start := time.Now()
				res, err := a.Run(ctx, input, opts...)
				elapsed += time.Since(start)
				if err != nil || res.Iterations != 10 {
					b.Fatalf("%v after %d turns", err, res.Iterations)
				}
			}
			b.ReportMetric(float64(elapsed.Nanoseconds())/float64(b.N*10), "ns/turn")
		})
	}
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
