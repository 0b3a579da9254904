package storetest

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentry/agentry/store"
)

// conversations is the store's Conversations, or a failed test.
func conversations(t *testing.T, s store.Store) store.Conversations {
	t.Helper()
	c, ok := s.(store.Conversations)
	if !ok {
		t.Fatalf("%T keeps no conversations", s)
	}
	return c
}

// runIn creates a run of conv for user, with records, its lease held,
// as a run that read the conversation's history just before does.
func runIn(t *testing.T, s store.Store, id, conv, user string, recs ...store.Record) error {
	t.Helper()
	r := newRun(id)
	r.Conversation, r.User = conv, user
	if h, _ := s.(store.Conversations).History(context.Background(), conv); h != nil {
		r.HistoryOf = h.RunID
	}
	return s.Append(context.Background(), store.Write{RunID: id, Holder: r.Holder, Create: &r, Records: recs})
}

// end ends a run with its history.
func end(t *testing.T, s store.Store, id, history string) {
	t.Helper()
	if err := s.Append(context.Background(), store.Write{RunID: id, Holder: "h1", Status: store.Completed, Release: true,
		Records: []store.Record{rec(store.KindResult, 1, `{}`), rec(store.KindHistory, 1, history)}}); err != nil {
		t.Fatalf("end %s: %v", id, err)
	}
}

func testConversations(t *testing.T, s store.Store) {
	ctx := context.Background()
	cs := conversations(t, s)
	if err := runIn(t, s, "run_x", "conv_none", "ada"); !errors.Is(err, store.ErrNoConversation) {
		t.Errorf("a run of a conversation that does not exist: %v", err)
	}
	if err := cs.CreateConversation(ctx, store.Conversation{ID: "conv_a", User: "ada"}); err != nil {
		t.Fatal(err)
	}
	if err := cs.CreateConversation(ctx, store.Conversation{ID: "conv_a", User: "bob"}); !errors.Is(err, store.ErrExists) {
		t.Errorf("an id taken: %v", err)
	}
	if h, err := cs.History(ctx, "conv_a"); h != nil || err != nil {
		t.Errorf("a new conversation's history: %v %v", h, err)
	}
	if err := runIn(t, s, "run_bob", "conv_a", "bob"); err == nil {
		t.Error("another user's run joined the conversation")
	}

	// One run at a time: a second is refused, naming the first, while it
	// goes on and while it waits for approval.
	if err := runIn(t, s, "run_1", "conv_a", "ada", rec(store.KindStart, 0, `{}`)); err != nil {
		t.Fatal(err)
	}
	var busy *store.BusyError
	if err := runIn(t, s, "run_2", "conv_a", "ada"); !errors.As(err, &busy) || busy.RunID != "run_1" || busy.Status != store.Running || !errors.Is(err, store.ErrBusy) {
		t.Errorf("a second run while the first goes on: %v", err)
	}
	if err := s.Append(ctx, store.Write{RunID: "run_1", Holder: "h1", Status: store.AwaitingApproval}); err != nil {
		t.Fatal(err)
	}
	if err := runIn(t, s, "run_2", "conv_a", "ada"); !errors.As(err, &busy) || busy.Status != store.AwaitingApproval {
		t.Errorf("a second run while the first waits for approval: %v", err)
	}
	if _, err := s.Get(ctx, "run_2"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("the refused run is on record: %v", err)
	}
	end(t, s, "run_1", `{"n": 1}`)
	if err := runIn(t, s, "run_2", "conv_a", "ada"); err != nil {
		t.Fatalf("the next run once the first ended: %v", err)
	}
	if h, err := cs.History(ctx, "conv_a"); err != nil || h == nil || string(h.Data) != `{"n": 1}` || h.Kind != store.KindHistory || h.RunID != "run_1" || h.Turn != 1 {
		t.Errorf("the history while run_2 goes: %+v %v", h, err)
	}
	end(t, s, "run_2", `{"n": 2}`)
	if h, _ := cs.History(ctx, "conv_a"); h == nil || string(h.Data) != `{"n": 2}` {
		t.Errorf("the history after run_2: %+v", h)
	}
	c, err := cs.Conversation(ctx, "conv_a")
	if err != nil || c.Runs != 2 || c.User != "ada" || c.Agent != "adder@1.0.0" || c.UpdatedAt.Before(c.CreatedAt) {
		t.Errorf("the conversation: %+v %v", c, err)
	}
	runs, err := s.List(ctx, store.Filter{Conversation: "conv_a"})
	if err != nil || len(runs) != 2 || runs[0].ID != "run_2" || runs[1].Conversation != "conv_a" {
		t.Errorf("its runs: %+v %v", runs, err)
	}
	if _, err := cs.Conversation(ctx, "conv_none"); !errors.Is(err, store.ErrNoConversation) {
		t.Errorf("a missing conversation: %v", err)
	}
}

// testConversationRace: runs that race to join one conversation are
// admitted one at a time.
func testConversationRace(t *testing.T, s store.Store) {
	cs := conversations(t, s)
	if err := cs.CreateConversation(context.Background(), store.Conversation{ID: "conv_r"}); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	var mu sync.Mutex
	joined, busy := 0, 0
	for i := range 8 {
		wg.Go(func() {
			err := runIn(t, s, fmt.Sprintf("run_%d", i), "conv_r", "")
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err == nil:
				joined++
			case errors.Is(err, store.ErrBusy):
				busy++
			default:
				t.Errorf("run %d: %v", i, err)
			}
		})
	}
	wg.Wait()
	if joined != 1 || busy != 7 {
		t.Errorf("%d joined, %d refused as busy; want 1 and 7", joined, busy)
	}
}

func testConversationList(t *testing.T, s store.Store) {
	ctx := context.Background()
	cs := conversations(t, s)
	for i, user := range []string{"ada", "bob", "ada", "ada"} {
		if err := cs.CreateConversation(ctx, store.Conversation{ID: fmt.Sprintf("conv_%d", i), User: user}); err != nil {
			t.Fatal(err)
		}
		time.Sleep(2 * time.Millisecond)
	}
	page, err := cs.ListConversations(ctx, store.ConversationFilter{User: "ada", Limit: 2})
	if err != nil || len(page) != 2 || page[0].ID != "conv_3" || page[1].ID != "conv_2" {
		t.Fatalf("ada's first page: %+v %v", page, err)
	}
	next, err := cs.ListConversations(ctx, store.ConversationFilter{User: "ada", Cursor: page[1].ID})
	if err != nil || len(next) != 1 || next[0].ID != "conv_0" {
		t.Errorf("ada's next page: %+v %v", next, err)
	}
	if all, _ := cs.ListConversations(ctx, store.ConversationFilter{}); len(all) != 4 {
		t.Errorf("everyone's: %d", len(all))
	}
}

// testConversationFork: a fork starts from the history of the run it was
// forked at, keeps it when the original is deleted, and goes its own
// way; the original is unchanged.
func testConversationFork(t *testing.T, s store.Store) {
	ctx := context.Background()
	cs := conversations(t, s)
	if err := cs.CreateConversation(ctx, store.Conversation{ID: "conv_o", User: "ada"}); err != nil {
		t.Fatal(err)
	}
	for i, h := range []string{`{"at": 1}`, `{"at": 2}`} {
		id := fmt.Sprintf("run_o%d", i+1)
		if err := runIn(t, s, id, "conv_o", "ada"); err != nil {
			t.Fatal(err)
		}
		end(t, s, id, h)
	}
	if err := runIn(t, s, "run_o3", "conv_o", "ada"); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ from, at string }{{"conv_o", "run_o3"}, {"conv_o", "run_nope"}, {"conv_x", "run_o1"}} {
		if err := cs.Fork(ctx, tc.from, tc.at, store.Conversation{ID: "conv_bad", User: "ada"}); err == nil {
			t.Errorf("a fork of %s at %s", tc.from, tc.at)
		}
	}
	if err := cs.Fork(ctx, "conv_o", "run_o1", store.Conversation{ID: "conv_f", User: "ada"}); err != nil {
		t.Fatal(err)
	}
	f, err := cs.Conversation(ctx, "conv_f")
	if err != nil || f.ForkedFrom != "conv_o" || f.ForkedAt != "run_o1" || f.Runs != 0 {
		t.Errorf("the fork: %+v %v", f, err)
	}
	if h, _ := cs.History(ctx, "conv_f"); h == nil || string(h.Data) != `{"at": 1}` || h.RunID != "run_o1" || h.Turn != 1 {
		t.Errorf("the fork's history: %+v", h)
	}
	end(t, s, "run_o3", `{"at": 3}`)
	if _, err := cs.DeleteConversation(ctx, "conv_o", "ada"); err != nil {
		t.Fatal(err)
	}
	if h, _ := cs.History(ctx, "conv_f"); h == nil || string(h.Data) != `{"at": 1}` {
		t.Errorf("the fork's history after the original went: %+v", h)
	}
	if err := runIn(t, s, "run_f1", "conv_f", "ada"); err != nil {
		t.Fatal(err)
	}
	end(t, s, "run_f1", `{"at": "f1"}`)
	if h, _ := cs.History(ctx, "conv_f"); h == nil || string(h.Data) != `{"at": "f1"}` {
		t.Errorf("the fork's own history: %+v", h)
	}
}

// testConversationDelete: deleting a conversation deletes its runs, their
// sub-runs and their logs, and no other; one with a run going is not
// deleted.
func testConversationDelete(t *testing.T, s store.Store) {
	ctx := context.Background()
	cs := conversations(t, s)
	for _, id := range []string{"conv_d", "conv_keep"} {
		if err := cs.CreateConversation(ctx, store.Conversation{ID: id}); err != nil {
			t.Fatal(err)
		}
	}
	if err := runIn(t, s, "run_d1", "conv_d", "", rec(store.KindStart, 0, `{"secret": "s1"}`)); err != nil {
		t.Fatal(err)
	}
	sub := newRun("run_d1_sub")
	sub.ParentID = "run_d1"
	mustCreate(t, s, sub)
	if _, err := cs.DeleteConversation(ctx, "conv_d", "ops"); !errors.Is(err, store.ErrBusy) {
		t.Errorf("deleting a conversation whose run goes on: %v", err)
	}
	if err := s.Append(ctx, store.Write{RunID: "run_d1", Holder: "h1", Status: store.AwaitingApproval, Release: true}); err != nil {
		t.Fatal(err)
	}
	if _, err := cs.DeleteConversation(ctx, "conv_d", "ops"); !errors.Is(err, store.ErrBusy) {
		t.Errorf("deleting a conversation whose run waits for approval: %v", err)
	}
	if err := s.Acquire(ctx, "run_d1", "h1", ttl); err != nil {
		t.Fatal(err)
	}
	end(t, s, "run_d1", `{}`)
	if err := runIn(t, s, "run_k1", "conv_keep", ""); err != nil {
		t.Fatal(err)
	}
	ids, err := cs.DeleteConversation(ctx, "conv_d", "ops")
	if err != nil || !slices.Equal(ids, []string{"run_d1", "run_d1_sub"}) {
		t.Fatalf("delete: %v %v", ids, err)
	}
	for _, id := range ids {
		if _, err := s.Get(ctx, id); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("run %s is left: %v", id, err)
		}
		if recs, _ := s.Records(ctx, id, 0); len(recs) != 0 {
			t.Errorf("run %s's log is left: %d records", id, len(recs))
		}
	}
	if _, err := cs.Conversation(ctx, "conv_d"); !errors.Is(err, store.ErrNoConversation) {
		t.Errorf("the conversation is left: %v", err)
	}
	if _, err := cs.DeleteConversation(ctx, "conv_d", "ops"); !errors.Is(err, store.ErrNoConversation) {
		t.Errorf("deleting it again: %v", err)
	}
	if _, err := s.Get(ctx, "run_k1"); err != nil {
		t.Errorf("another conversation's run went too: %v", err)
	}
	audit, err := s.AuditLog(ctx, "")
	var found bool
	for _, a := range audit {
		if a.Target == "conversation:conv_d" {
			found = a.Rule == "conversation.delete" && a.Decision == "delete" && a.UserID == "ops" && a.Reason == "deleted with 2 runs (sub-runs included) and their logs"
		}
		if strings.Contains(a.Reason+a.Target, "s1") {
			t.Errorf("the audit log holds content: %+v", a)
		}
	}
	if err != nil || !found {
		t.Errorf("no audit record of the deletion: %+v %v", audit, err)
	}
	if err := s.VerifyAudit(ctx); err != nil {
		t.Errorf("the audit chain after a deletion: %v", err)
	}
}

// testConversationOrder: the history the next run starts from is the
// newest by the store's order, whatever the runs' clocks said; a run
// that read the history before another run ended is refused, to read it
// again.
func testConversationOrder(t *testing.T, s store.Store) {
	ctx := context.Background()
	cs := conversations(t, s)
	if err := cs.CreateConversation(ctx, store.Conversation{ID: "conv_o"}); err != nil {
		t.Fatal(err)
	}
	late := time.Now().Add(time.Hour)
	for i, at := range []time.Time{late, late.Add(-2 * time.Hour)} { // the second run's clock is behind
		id := fmt.Sprintf("run_%d", i+1)
		r := newRun(id)
		r.Conversation, r.CreatedAt = "conv_o", at
		if h, _ := cs.History(ctx, "conv_o"); h != nil {
			r.HistoryOf = h.RunID
		}
		if err := s.Append(ctx, store.Write{RunID: id, Holder: r.Holder, Create: &r}); err != nil {
			t.Fatal(err)
		}
		end(t, s, id, fmt.Sprintf(`{"n": %d}`, i+1))
	}
	if h, _ := cs.History(ctx, "conv_o"); h == nil || h.RunID != "run_2" {
		t.Errorf("the newest history: %+v, want run_2's", h)
	}
	stale := newRun("run_stale")
	stale.Conversation, stale.HistoryOf = "conv_o", "run_1"
	if err := s.Append(ctx, store.Write{RunID: stale.ID, Holder: stale.Holder, Create: &stale}); !errors.Is(err, store.ErrStaleHistory) {
		t.Errorf("a run that read an older history: %v", err)
	}
	if _, err := s.Get(ctx, "run_stale"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("the refused run is on record: %v", err)
	}
}
