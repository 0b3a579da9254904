package agent

import (
	"cmp"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/agentry/agentry/llm"
	"github.com/agentry/agentry/store"
)

const chatSpec = `{"agent_name": "chat", "version": "v1", "model_name": "m", "system_text": "Be brief.", "tools": ["add"],
	"messages": [{"role": "user", "content": "Hello?"}, {"role": "assistant", "content": "Hello."}]}`

// said is the text of a request's messages after the system prompt, one
// "role: content" a message, tool calls as "→ name".
func said(req llm.Request) []string {
	var out []string
	for _, m := range req.Messages {
		switch {
		case m.Role == llm.RoleSystem:
		case len(m.ToolCalls) > 0:
			out = append(out, m.Role.String()+": → "+m.ToolCalls[0].Name)
		default:
			out = append(out, m.Role.String()+": "+m.Content)
		}
	}
	return out
}

// TestConversation: each run of a conversation starts from what was said
// before it (tasks, tool calls and results, answers), after the system
// prompt and the spec's messages and before its own task; the run's
// Result holds what the model was sent; a replay sends the same; a
// conversation of another user is not found.
func TestConversation(t *testing.T) {
	ctx := context.Background()
	st := openStore(t, filepath.Join(t.TempDir(), "runs.db")).Store
	model := &recorder{replies: []reply{
		answer("Hi Ada!"),
		calls(call("c1", "add", `{"a": 2, "b": 3}`)), answer("5."),
		answer("You are Ada, and 2 + 3 is 5."),
	}}
	a := newTestAgent(t, chatSpec, model)
	ask := func(text string, opts ...RunOption) *Result {
		t.Helper()
		res, err := a.Run(ctx, map[string]any{"task": text}, append([]RunOption{WithStore(st), WithConversation("conv_1"), WithUser("ada")}, opts...)...)
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	ask("My name is Ada.")
	second := ask("What is 2 + 3?")
	ask("Who am I, and what was the sum?")
	want := []string{"user: Hello?", "assistant: Hello.",
		"user: task = \"My name is Ada.\"", "assistant: Hi Ada!",
		"user: task = \"What is 2 + 3?\"", "assistant: → add", "tool: 5", "assistant: 5.",
		"user: task = \"Who am I, and what was the sum?\""}
	if got := said(model.reqs[3]); strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("the third run's model was sent:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if got := said(llm.Request{Messages: second.Messages}); len(got) != 8 || got[2] != `user: task = "My name is Ada."` {
		t.Errorf("the second run's Result: %q", got)
	}
	rep, err := a.Replay(ctx, st, second.ID)
	if err != nil || !rep.Identical() {
		t.Errorf("the replay of the second run: %v %+v", err, rep)
	}
	cs := st.(store.Conversations)
	if c, err := cs.Conversation(ctx, "conv_1"); err != nil || c.Runs != 3 || c.User != "ada" {
		t.Errorf("the conversation: %+v %v", c, err)
	}
	_, err = a.Run(ctx, map[string]any{"task": "Hi."}, WithStore(st), WithConversation("conv_1"), WithUser("bob"))
	if !errors.Is(err, store.ErrNoConversation) {
		t.Errorf("another user's conversation: %v", err)
	}
	if _, err := a.Run(ctx, nil, WithConversation("conv_1")); !errors.Is(err, ErrConfig) {
		t.Errorf("a conversation without a store: %v", err)
	}
}

// TestConversationHistoryCarried: context.history leaves the earlier
// runs' tool traffic out, and caps what is carried without starting
// inside a call's results, read from the store or given in Go.
func TestConversationHistoryCarried(t *testing.T) {
	for _, tc := range []struct {
		name, history string
		want          []string
	}{
		{"tools left out", `{"tools": false}`, []string{`user: task = "Add."`, "assistant: 5.", `user: task = "Again."`}},
		{"capped", `{"max_messages": 3}`, []string{"assistant: → add", "tool: 5", "assistant: 5.", `user: task = "Again."`}},
		{"capped inside a call", `{"max_messages": 2}`, []string{"assistant: 5.", `user: task = "Again."`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			st := openStore(t, filepath.Join(t.TempDir(), "runs.db")).Store
			model := &recorder{replies: []reply{calls(call("c1", "add", `{"a": 2, "b": 3}`)), answer("5."), answer("5 again.")}}
			a := newTestAgent(t, `{"agent_name": "chat", "version": "v1", "model_name": "m", "system_text": "S.", "tools": ["add"],
				"context": {"history": `+tc.history+`}}`, model)
			var first *Result
			for _, text := range []string{"Add.", "Again."} {
				res, err := a.Run(ctx, map[string]any{"task": text}, WithStore(st), WithConversation("c"))
				if err != nil {
					t.Fatal(err)
				}
				first = cmp.Or(first, res)
			}
			if got := said(model.reqs[2]); strings.Join(got, "\n") != strings.Join(tc.want, "\n") {
				t.Errorf("sent %q, want %q", got, tc.want)
			}
			// A history given in Go is carried as the spec says too.
			model.replies = append(model.replies, answer("5 once more."))
			if _, err := a.Run(ctx, map[string]any{"task": "Again."}, WithHistory(first.Messages[1:]...)); err != nil {
				t.Fatal(err)
			}
			if got := said(model.reqs[3]); strings.Join(got, "\n") != strings.Join(tc.want, "\n") {
				t.Errorf("with the history in Go, sent %q, want %q", got, tc.want)
			}
		})
	}
}

// TestConversationOneRunAtATime: while a run of a conversation waits for
// approval (or goes on), another is refused at once, naming it; once it
// is decided, the next run starts from it.
func TestConversationOneRunAtATime(t *testing.T) {
	ctx := context.Background()
	st := openStore(t, filepath.Join(t.TempDir(), "runs.db")).Store
	model := &recorder{replies: []reply{calls(call("c1", "add", `{"a": 1, "b": 1}`)), answer("2."), answer("Yes, 2.")}}
	a := newTestAgent(t, `{"agent_name": "chat", "version": "v1", "model_name": "m", "system_text": "S.", "tools": ["add"],
		"policy": {"approval": {"tools": ["add"]}}}`, model)
	paused, err := a.Run(ctx, map[string]any{"task": "Add."}, WithStore(st), WithConversation("c"))
	if !errors.Is(err, ErrAwaitingApproval) {
		t.Fatalf("the first run: %v", err)
	}
	refused, err := a.Run(ctx, map[string]any{"task": "Sure?"}, WithStore(st), WithConversation("c"))
	if refused.Error == nil || refused.Error.Code != CodeConversationBusy || refused.Error.Details["run_id"] != paused.ID {
		t.Errorf("the refused run's Result: %+v", refused.Error)
	}
	var busy *store.BusyError
	if !errors.As(err, &busy) || busy.RunID != paused.ID || busy.Status != store.AwaitingApproval || !errors.Is(err, store.ErrBusy) {
		t.Fatalf("a second run while the first waits: %v", err)
	}
	sess, err := a.Resume(ctx, st, paused.ID, Approve(paused.Waiting[0].Key))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := sess.Run(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := a.Run(ctx, map[string]any{"task": "Sure?"}, WithStore(st), WithConversation("c")); err != nil {
		t.Fatal(err)
	}
	if got := said(model.reqs[len(model.reqs)-1]); len(got) != 5 || got[3] != "assistant: 2." {
		t.Errorf("the run after the decided one was sent %q", got)
	}
}

// TestConversationSealed: with an encryption key, a conversation's
// history is sealed in the store's file like the rest of its runs' logs,
// and read back.
func TestConversationSealed(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "runs.db")
	st := openStore(t, path).Store
	key := []byte("0123456789abcdef0123456789abcdef")
	model := &recorder{replies: []reply{answer("Noted: the-canary-word."), answer("It was the-canary-word.")}}
	a, err := New(mustSpec(t, `{"agent_name": "chat", "version": "v1", "model_name": "m", "system_text": "S."}`),
		WithProvider(model, "test"), WithEncryptionKey(key))
	if err != nil {
		t.Fatal(err)
	}
	for _, text := range []string{"Remember the-canary-word.", "What was it?"} {
		if _, err := a.Run(ctx, map[string]any{"task": text}, WithStore(st), WithConversation("c")); err != nil {
			t.Fatal(err)
		}
	}
	if got := said(model.reqs[1]); len(got) != 3 || got[1] != "assistant: Noted: the-canary-word." {
		t.Errorf("the second run was sent %q", got)
	}
	st.Close()
	for _, f := range []string{path, path + "-wal"} {
		data, _ := os.ReadFile(f)
		if strings.Contains(string(data), "the-canary-word") {
			t.Errorf("%s holds the conversation in the clear", filepath.Base(f))
		}
	}
}

// TestConversationRedacted: a secret said in a conversation reaches the
// model of the run it was said in, and nothing else: no record of the
// store holds it (the history the next run reads, that run's start
// record), and the next run's model is sent the redacted history.
func TestConversationRedacted(t *testing.T) {
	ctx := context.Background()
	st := openStore(t, filepath.Join(t.TempDir(), "runs.db")).Store
	const secret = "sk-proj-CANARYconv0000000000000000000000000001"
	model := &recorder{replies: []reply{answer("Noted your key."), answer("I cannot show it.")}}
	a := newTestAgent(t, `{"agent_name": "chat", "version": "v1", "model_name": "m", "system_text": "S."}`, model)
	var ids []string
	for _, text := range []string{"My key is " + secret + ".", "What is my key?"} {
		res, err := a.Run(ctx, map[string]any{"task": text}, WithStore(st), WithConversation("c"))
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, res.ID)
	}
	for _, id := range ids {
		recs, err := st.Records(ctx, id, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range recs {
			if strings.Contains(string(r.Data), "CANARYconv") {
				t.Errorf("run %s's %s record holds the secret", id, r.Kind)
			}
		}
	}
	if got := strings.Join(said(model.reqs[1]), "\n"); strings.Contains(got, "CANARYconv") || !strings.Contains(got, "[REDACTED") {
		t.Errorf("the second run was sent:\n%s", got)
	}
}

// TestConversationCompacted: when a conversation's history no longer
// fits, it is what compaction summarises first, and the summary is what
// the next runs start from: the words it replaced are never sent again.
func TestConversationCompacted(t *testing.T) {
	ctx := context.Background()
	st := openStore(t, filepath.Join(t.TempDir(), "runs.db")).Store
	long := func(word string) string { return strings.Repeat(word+" ", 30) }
	model := &recorder{replies: []reply{
		answer(long("first-answer")),
		answer("SUMMARY-ONE"), answer(long("second-answer")),
		answer("SUMMARY-TWO"), answer("third"),
	}}
	a := newTestAgent(t, `{"agent_name": "chat", "version": "v1", "model_name": "m", "system_text": "S.",
		"context": {"compaction": "summarize", "window": 256, "keep_turns": 1}}`, model)
	for _, task := range []string{long("first-task"), long("second-task"), "third?"} {
		if _, err := a.Run(ctx, map[string]any{"task": task}, WithStore(st), WithConversation("c")); err != nil {
			t.Fatal(err)
		}
	}
	var sent []string
	for _, req := range model.reqs {
		sent = append(sent, strings.Join(said(req), "\n"))
	}
	if len(sent) != 5 || !strings.Contains(sent[1], "first-task") || strings.Contains(sent[2], "first-task") || !strings.Contains(sent[2], "SUMMARY-ONE") {
		t.Fatalf("the second run: a summary of the first, then its call with it:\n%s", strings.Join(sent, "\n---\n"))
	}
	for i, s := range sent[3:] {
		if strings.Contains(s, "first-task") || strings.Contains(s, "first-answer") {
			t.Errorf("call %d of the third run sent the first run's words again:\n%s", i+1, s)
		}
	}
	if !strings.Contains(sent[4], "SUMMARY-TWO") {
		t.Errorf("the third run's call:\n%s", sent[4])
	}
}

// racing is a store whose first History read lets another run of the
// conversation go and end before the reader's run is created: the
// interleaving a busy conversation's next message can meet.
type racing struct {
	store.Store
	store.Conversations
	once   sync.Once
	during func()
}

func (r *racing) History(ctx context.Context, id string) (*store.RunRecord, error) {
	rec, err := r.Conversations.History(ctx, id)
	r.once.Do(r.during)
	return rec, err
}

// TestConversationHistoryRace: a run that read the history just before
// another run of the conversation ended reads it again, so that what was
// said last is neither missing from what its model is sent nor from the
// history after it.
func TestConversationHistoryRace(t *testing.T) {
	ctx := context.Background()
	st := openStore(t, filepath.Join(t.TempDir(), "runs.db")).Store
	model := &recorder{replies: []reply{answer("Hi Ada."), answer("Tea, noted."), answer("Ada, who likes tea.")}}
	a := newTestAgent(t, `{"agent_name": "chat", "version": "v1", "model_name": "m", "system_text": "S."}`, model)
	say := func(st store.Store, text string) {
		t.Helper()
		if _, err := a.Run(ctx, map[string]any{"task": text}, WithStore(st), WithConversation("c")); err != nil {
			t.Fatal(err)
		}
	}
	say(st, "My name is Ada.")
	race := &racing{Store: st, Conversations: st.(store.Conversations)}
	race.during = func() { say(st, "I like tea.") }
	say(race, "Who am I?")
	last := strings.Join(said(model.reqs[2]), "\n")
	if !strings.Contains(last, "I like tea.") || !strings.Contains(last, "Tea, noted.") {
		t.Errorf("the run that raced was sent:\n%s", last)
	}
	h, _ := st.(store.Conversations).History(ctx, "c")
	if h == nil || !strings.Contains(string(h.Data), "I like tea.") || !strings.Contains(string(h.Data), "Who am I?") {
		t.Errorf("the history after it: %v", h)
	}
}
