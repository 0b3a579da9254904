package server

import (
	"context"
	"iter"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/agentry/agentry/agent"
	"github.com/agentry/agentry/llm"
	"github.com/agentry/agentry/spec"
	"github.com/agentry/agentry/store"
)

// rememberer is a model that answers from what it is sent: the name a
// user gave earlier in the conversation, and how many messages came; a
// message that says "hold" waits until its run is stopped.
func rememberer() llm.Provider {
	return llm.ProviderFunc(func(ctx context.Context, req *llm.Request) (*llm.Response, error) {
		name := ""
		for _, m := range req.Messages {
			if _, after, ok := strings.Cut(m.Content, "My name is "); ok && m.Role == llm.RoleUser {
				name, _, _ = strings.Cut(after, ".")
			}
		}
		last := req.Messages[len(req.Messages)-1].Content
		switch {
		case strings.Contains(last, "hold"):
			<-ctx.Done()
			return nil, ctx.Err()
		case strings.Contains(last, "What is my name?") && name != "":
			return &llm.Response{Content: "Your name is " + name + "."}, nil
		case strings.Contains(last, "What is my name?"):
			return &llm.Response{Content: "I do not know."}, nil
		}
		return &llm.Response{Content: "Noted."}, nil
	})
}

// chatServer is a server over st with one agent, chat, that answers with
// rememberer, for keys.
func chatServer(t *testing.T, st store.Store, keys []Key) *fixture {
	t.Helper()
	a, err := agent.New(&spec.Spec{AgentName: "chat", Version: "v1", SystemText: "Chat.", UserText: "${message}", InputKeys: []string{"message"}},
		agent.WithProvider(rememberer(), "func"))
	if err != nil {
		t.Fatal(err)
	}
	reg := agent.NewRegistry()
	if err := reg.Register(a); err != nil {
		t.Fatal(err)
	}
	f := &fixture{st: st, release: make(chan struct{})}
	if f.srv, err = New(Config{Store: st, Agents: reg, Keys: keys}); err != nil {
		t.Fatal(err)
	}
	f.http = httptest.NewServer(f.srv)
	f.cleanup(t, reg)
	return f
}

// TestConversationOverHTTP: a conversation over HTTP remembers what was
// said, shows its turns, goes on from a second server over the same
// store, forks at a run (the fork knows what was said up to it, the
// original goes on unchanged), and is deleted with its runs.
func TestConversationOverHTTP(t *testing.T) {
	keys := []Key{{Name: "ada", SHA256: HashKey("ada-key"), Role: RoleRunner}}
	st, err := store.Open(context.Background(), filepath.Join(t.TempDir(), "runs.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	f := chatServer(t, st, keys)
	code, conv := f.do(t, "POST", "/v1/conversations", "ada-key", `{"agent": "chat"}`)
	if code != 201 || conv["agent"] != "chat@v1" || conv["user"] != "ada" {
		t.Fatalf("create: %d %v", code, conv)
	}
	id := conv["id"].(string)
	say := func(f *fixture, text string) map[string]any {
		t.Helper()
		code, res := f.do(t, "POST", "/v1/conversations/"+id+"/messages?wait=true", "ada-key", `{"message": "`+text+`"}`)
		if code != 200 {
			t.Fatalf("%q: %d %v", text, code, res)
		}
		return res
	}
	first := say(f, "My name is Ada.")
	say(f, "I like tea.")
	if res := say(f, "What is my name?"); res["result"] != "Your name is Ada." {
		t.Errorf("the third answer: %v", res["result"])
	}
	code, got := f.do(t, "GET", "/v1/conversations/"+id, "ada-key", "")
	turns, _ := got["turns"].([]any)
	if code != 200 || len(turns) != 3 || got["runs"] != float64(3) {
		t.Fatalf("the conversation: %d %v", code, got)
	}
	if t0 := turns[0].(map[string]any); t0["message"] != "My name is Ada." || t0["answer"] != "Noted." || t0["run_id"] != first["id"] {
		t.Errorf("its first turn: %v", t0)
	}
	code, page := f.do(t, "GET", "/v1/runs?conversation="+id, "ada-key", "")
	if runs, _ := page["runs"].([]any); code != 200 || len(runs) != 3 {
		t.Errorf("its runs: %d %v", code, page)
	}

	// A second server over the same store goes on with it.
	g := chatServer(t, st, keys)
	if res := say(g, "What is my name?"); res["result"] != "Your name is Ada." {
		t.Errorf("from a second server: %v", res["result"])
	}

	// A fork at the first run knows what was said up to it, and goes its
	// own way.
	code, fork := f.do(t, "POST", "/v1/conversations/"+id+"/fork", "ada-key", `{"at": "`+first["id"].(string)+`"}`)
	if code != 201 || fork["forked_from"] != id || fork["forked_at"] != first["id"] || fork["id"] == id {
		t.Fatalf("fork: %d %v", code, fork)
	}
	fid := fork["id"].(string)
	code, res := f.do(t, "POST", "/v1/conversations/"+fid+"/messages?wait=true", "ada-key", `{"message": "What is my name?"}`)
	if code != 200 || res["result"] != "Your name is Ada." {
		t.Errorf("the fork: %d %v", code, res["result"])
	}
	if len(res["messages"].([]any)) != 5 { // system, the first run's two, the question, the answer
		t.Errorf("the fork's run was sent %d messages, want 5", len(res["messages"].([]any)))
	}
	if _, orig := f.do(t, "GET", "/v1/conversations/"+id, "ada-key", ""); orig["runs"] != float64(4) {
		t.Errorf("the original after the fork: %v", orig["runs"])
	}

	// Deleted: it and its runs are gone.
	if code, _, body := f.raw(t, "DELETE", "/v1/conversations/"+id, "ada-key", ""); code != 204 {
		t.Fatalf("delete: %d %s", code, body)
	}
	if code, _ := f.do(t, "GET", "/v1/conversations/"+id, "ada-key", ""); code != 404 {
		t.Errorf("the deleted conversation: %d", code)
	}
	if code, _ := f.do(t, "GET", "/v1/runs/"+first["id"].(string), "ada-key", ""); code != 404 {
		t.Errorf("a run of the deleted conversation: %d", code)
	}
	if code, res := f.do(t, "POST", "/v1/conversations/"+fid+"/messages?wait=true", "ada-key", `{"message": "What is my name?"}`); code != 200 || res["result"] != "Your name is Ada." {
		t.Errorf("the fork after the original went: %d %v", code, res["result"])
	}
}

// TestConversationBusy: while a run of a conversation goes on, a second
// message is refused (409, naming it), queued (it starts once the first
// ended) or interrupts (the first ends aborted, its words in the history
// the next run sees).
func TestConversationBusy(t *testing.T) {
	st, err := store.Open(context.Background(), filepath.Join(t.TempDir(), "runs.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	f := chatServer(t, st, nil)
	_, conv := f.do(t, "POST", "/v1/conversations", "", `{}`)
	id := conv["id"].(string)
	path := "/v1/conversations/" + id + "/messages"
	code, held := f.do(t, "POST", path, "", `{"message": "My name is Ada. Now hold."}`)
	if code != 201 {
		t.Fatalf("the first message: %d %v", code, held)
	}
	heldID := held["run_id"].(string)

	code, body := f.do(t, "POST", path, "", `{"message": "What is my name?"}`)
	if e, _ := body["error"].(map[string]any); code != 409 || e["code"] != "conversation_busy" || !strings.Contains(e["message"].(string), heldID) {
		t.Errorf("refused: %d %v", code, body)
	}

	queued := make(chan map[string]any, 1)
	go func() {
		_, res := f.do(t, "POST", path+"?wait=true", "", `{"message": "What is my name?", "if_busy": "queue"}`)
		queued <- res
	}()
	select {
	case res := <-queued:
		t.Fatalf("the queued message did not wait: %v", res)
	case <-time.After(300 * time.Millisecond):
	}
	code, res := f.do(t, "POST", path+"?wait=true", "", `{"message": "Forget it. What is my name?", "if_busy": "interrupt"}`)
	if code != 200 || res["result"] != "Your name is Ada." {
		t.Errorf("the interrupting message: %d %v", code, res)
	}
	if run, _ := st.Get(context.Background(), heldID); run.Status != store.Aborted {
		t.Errorf("the interrupted run: %s", run.Status)
	}
	select {
	case res := <-queued:
		if res["result"] != "Your name is Ada." {
			t.Errorf("the queued message: %v", res)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the queued message never ran")
	}
	_, got := f.do(t, "GET", "/v1/conversations/"+id, "", "")
	if turns := got["turns"].([]any); len(turns) != 3 || turns[0].(map[string]any)["status"] != "aborted" {
		t.Errorf("the turns: %v", turns)
	}
}

// TestConversationQueueOrder: messages queued behind a busy conversation
// run in the order they came, each starting from the one before it.
func TestConversationQueueOrder(t *testing.T) {
	st, err := store.Open(context.Background(), filepath.Join(t.TempDir(), "runs.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	f := chatServer(t, st, nil)
	_, conv := f.do(t, "POST", "/v1/conversations", "", `{}`)
	id := conv["id"].(string)
	path := "/v1/conversations/" + id + "/messages"
	_, held := f.do(t, "POST", path, "", `{"message": "Please hold."}`)
	waiting := func() int {
		f.srv.mu.Lock()
		defer f.srv.mu.Unlock()
		if l := f.srv.lines[id]; l != nil {
			return l.waiting
		}
		return 0
	}
	texts := []string{"First.", "Second.", "Third.", "Fourth."}
	answered := make(chan int, len(texts))
	for i, text := range texts {
		go func() {
			code, _ := f.do(t, "POST", path+"?wait=true", "", `{"message": "`+text+`", "if_busy": "queue"}`)
			answered <- code
		}()
		for deadline := time.Now().Add(20 * time.Second); waiting() != i+1; time.Sleep(5 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("message %d never lined up", i+1)
			}
		}
	}
	if code, _ := f.do(t, "POST", "/v1/runs/"+held["run_id"].(string)+"/abort", "", ""); code != 202 {
		t.Fatalf("abort: %d", code)
	}
	for range texts {
		if code := <-answered; code != 200 {
			t.Errorf("a queued message: %d", code)
		}
	}
	_, got := f.do(t, "GET", "/v1/conversations/"+id, "", "")
	var said []string
	for _, turn := range got["turns"].([]any) {
		said = append(said, turn.(map[string]any)["message"].(string))
	}
	if want := append([]string{"Please hold."}, texts...); strings.Join(said, " ") != strings.Join(want, " ") {
		t.Errorf("the conversation's runs, in order: %q, want %q", said, want)
	}
	if n := waiting(); n != 0 {
		t.Errorf("%d still in line", n)
	}
}

// TestConversationInterruptsApproval: a message that interrupts a run
// waiting for approval aborts it (its call never made) and runs after it.
func TestConversationInterruptsApproval(t *testing.T) {
	f, _ := newViewerFixture(t, nil)
	_, conv := f.do(t, "POST", "/v1/conversations", "", `{"agent": "approve"}`)
	path := "/v1/conversations/" + conv["id"].(string) + "/messages"
	code, held := f.do(t, "POST", path+"?wait=true", "", `{"message": "Store release 2.0.0"}`)
	if code != 200 || held["terminate_reason"] != "awaiting_approval" {
		t.Fatalf("the first message: %d %v", code, held)
	}
	heldID := held["id"].(string)
	code, res := f.do(t, "POST", path+"?wait=true", "", `{"message": "Never mind.", "if_busy": "interrupt"}`)
	if code != 200 || res["success"] != true {
		t.Fatalf("the interrupting message: %d %v", code, res)
	}
	if run, _ := f.st.Get(context.Background(), heldID); run.Status != store.Aborted {
		t.Errorf("the run that waited: %s", run.Status)
	}
	recs, _ := f.st.Records(context.Background(), heldID, 0)
	for _, r := range recs {
		if r.Kind == store.KindToolResult {
			t.Error("the call that waited was made")
		}
	}
}

// TestMessageOfADeletedConversation: a message that waited while its
// conversation was deleted is refused (404), rather than making it anew.
func TestMessageOfADeletedConversation(t *testing.T) {
	st, err := store.Open(context.Background(), filepath.Join(t.TempDir(), "runs.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	f := chatServer(t, st, nil)
	_, conv := f.do(t, "POST", "/v1/conversations", "", `{}`)
	id := conv["id"].(string)
	if rf := f.srv.stillThere(context.Background(), id); rf != nil {
		t.Fatalf("the conversation: %+v", rf)
	}
	if _, err := st.(store.Conversations).DeleteConversation(context.Background(), id, "ada"); err != nil {
		t.Fatal(err)
	}
	if rf := f.srv.stillThere(context.Background(), id); rf == nil || rf.status != 404 {
		t.Errorf("after the deletion: %+v", rf)
	}
}

// streamer is a model that writes its answer in two pieces, the second
// once told to: a reply a stream can be watched in the middle of.
type streamer struct{ more chan struct{} }

func (m streamer) Generate(ctx context.Context, req *llm.Request) (*llm.Response, error) {
	return llm.Collect(m.Stream(ctx, req), nil)
}

func (m streamer) Stream(ctx context.Context, _ *llm.Request) iter.Seq2[llm.Chunk, error] {
	return func(yield func(llm.Chunk, error) bool) {
		if !yield(llm.Chunk{Text: strings.Repeat("Hello, Ada. ", 20)}, nil) { // past the 64 bytes a stream stays behind
			return
		}
		select {
		case <-m.more:
		case <-ctx.Done():
			yield(llm.Chunk{}, ctx.Err())
			return
		}
		yield(llm.Chunk{Text: "Bye!", FinishReason: "stop"}, nil)
	}
}

// streamServer is a server over st with one agent, talker, whose model
// writes its answer in two pieces, the second once f.release closes.
func streamServer(t *testing.T, st store.Store) *fixture {
	t.Helper()
	f := &fixture{st: st, release: make(chan struct{})}
	a, err := agent.New(&spec.Spec{AgentName: "talker", Version: "v1", SystemText: "Talk.", UserText: "${message}", InputKeys: []string{"message"}},
		agent.WithProvider(streamer{f.release}, "stream"))
	if err != nil {
		t.Fatal(err)
	}
	reg := agent.NewRegistry()
	reg.Register(a)
	if f.srv, err = New(Config{Store: st, Agents: reg}); err != nil {
		t.Fatal(err)
	}
	f.http = httptest.NewServer(f.srv)
	f.cleanup(t, reg)
	return f
}

// TestConversationStreams: a message's answer reaches the run's event
// stream as the model writes it: what was written before the stream
// opened, then each piece, then the run's end.
func TestConversationStreams(t *testing.T) {
	st, err := store.Open(context.Background(), filepath.Join(t.TempDir(), "runs.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	f := streamServer(t, st)
	more := f.release
	_, conv := f.do(t, "POST", "/v1/conversations", "", `{}`)
	_, started := f.do(t, "POST", "/v1/conversations/"+conv["id"].(string)+"/messages", "", `{"message": "Hi."}`)
	id := started["run_id"].(string)
	time.AfterFunc(300*time.Millisecond, func() { close(more) }) // the rest, once the stream has the first piece
	events := f.stream(t, id, 0)
	var text []string
	for _, e := range events {
		if e.typ == "content_chunk" {
			text = append(text, e.data["content"].(string))
		}
	}
	if strings.Join(text, "") != strings.Repeat("Hello, Ada. ", 20)+"Bye!" || len(text) < 2 || events[len(events)-1].typ != "run_end" {
		t.Errorf("the chunks %q, the events %v", text, events)
	}
}
