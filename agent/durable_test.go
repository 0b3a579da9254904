package agent

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"path/filepath"
	"slices"
	"sync"
	"testing"

	"github.com/agentry/agentry/event"
	"github.com/agentry/agentry/internal/testdb"
	"github.com/agentry/agentry/runlog"
	"github.com/agentry/agentry/store"
)

var backends = []struct {
	name string
	dsn  func(testing.TB) string
}{
	{"sqlite", testdb.SQLite},
	{"postgres", testdb.Postgres},
}

// A stored run's log holds its start, each model call and tool call once,
// its events as a listener saw them, and the Result Run returned.
func TestStoredRun(t *testing.T) {
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) {
			ctx := context.Background()
			st := openStore(t, b.dsn(t))
			l := ledger{filepath.Join(t.TempDir(), "ledger")}
			a := payerAgent(t, durableTools(t, l, false, nil))
			var mu sync.Mutex
			var seen []event.Event
			res, err := a.Run(ctx, payerInput, WithStore(st), WithEvents(func(e event.Event) {
				mu.Lock()
				if e.Type != event.ContentChunk { // the log keeps whole replies, in the model calls
					seen = append(seen, e)
				}
				mu.Unlock()
			}))
			if err != nil {
				t.Fatal(err)
			}
			run, err := st.Get(ctx, res.ID)
			if err != nil {
				t.Fatal(err)
			}
			if run.Status != store.Completed || run.Name != "payer" || run.Version != "1.0.0" || run.Holder != "" ||
				run.Turns != 3 || run.Tokens != res.TokenUsage.TotalTokens || run.Outcome != "success" || run.CostUSD == nil {
				t.Errorf("stored run = %+v", run)
			}
			recs, err := st.Records(ctx, res.ID, 0)
			if err != nil {
				t.Fatal(err)
			}
			var kinds []store.Kind
			count := map[store.Kind]int{}
			for _, r := range recs {
				if r.Kind != store.KindEvent {
					kinds = append(kinds, r.Kind)
				}
				count[r.Kind]++
			}
			if kinds[0] != store.KindStart || kinds[len(kinds)-1] != store.KindResult {
				t.Errorf("log kinds %v: want start first and result last", kinds)
			}
			if count[store.KindModelCall] != 3 || count[store.KindToolResult] != 3 || count[store.KindToolIntent] != 1 {
				t.Errorf("log holds %d model calls, %d tool results, %d intents; want 3, 3 and 1 (the payment)",
					count[store.KindModelCall], count[store.KindToolResult], count[store.KindToolIntent])
			}
			if count[store.KindEvent] != len(seen) {
				t.Errorf("log holds %d events, the listener saw %d", count[store.KindEvent], len(seen))
			}
			want, _ := json.Marshal(res)
			if got := storedResult(t, st, res.ID); !bytes.Equal(got, want) {
				t.Errorf("stored Result differs from the one returned:\n%s\n%s", got, want)
			}
			stored, err := runlog.Read(ctx, st, res.ID)
			if err != nil {
				t.Fatal(err)
			}
			evs, err := stored.Events()
			if err != nil {
				t.Fatal(err)
			}
			for i := range evs {
				// Stored, an event is numbered by its place in the log.
				if evs[i].Type != seen[i].Type || evs[i].Turn != seen[i].Turn || i > 0 && evs[i].Seq <= evs[i-1].Seq {
					t.Fatalf("stored event %d = %s #%d, the listener saw %s #%d", i, evs[i].Type, evs[i].Seq, seen[i].Type, seen[i].Seq)
				}
			}
			// The intent of the payment was committed before its result.
			intent, result := -1, -1
			for i, r := range recs {
				if r.Key == res.ID+":2:0" && r.Kind == store.KindToolIntent {
					intent = i
				}
				if r.Key == res.ID+":2:0" && r.Kind == store.KindToolResult {
					result = i
				}
			}
			if intent < 0 || result < intent {
				t.Errorf("payment intent at %d, result at %d: want the intent first", intent, result)
			}
		})
	}
}

// A run whose store fails stops with ErrStore, instead of going on
// without a record. Here the start is written, and the next write, the
// payment's intent, fails: the payment is not sent.
func TestStoreFailureStopsTheRun(t *testing.T) {
	ctx := context.Background()
	st := openStore(t, testdb.SQLite(t))
	l := ledger{filepath.Join(t.TempDir(), "ledger")}
	a := payerAgent(t, durableTools(t, l, false, nil))
	res, err := a.Run(ctx, payerInput, WithStore(&failingStore{Store: st, after: 1}))
	if !errors.Is(err, ErrStore) {
		t.Fatalf("Run = %v, want ErrStore", err)
	}
	if res.Error == nil || res.Error.Code != CodeStoreError {
		t.Errorf("Result error = %+v, want code %s", res.Error, CodeStoreError)
	}
	if got := l.sends(t); len(got) != 0 {
		t.Errorf("the payment was sent (%v) though its intent could not be committed", got)
	}
}

// failingStore fails every Append after the first `after`.
type failingStore struct {
	store.Store
	mu    sync.Mutex
	after int
	n     int
}

func (s *failingStore) Append(ctx context.Context, w store.Write) error {
	s.mu.Lock()
	s.n++
	n := s.n
	s.mu.Unlock()
	if n > s.after {
		return errors.New("disk full")
	}
	return s.Store.Append(ctx, w)
}

// Two resumes of one run at once: one takes it, the other is told it is
// held.
func TestConcurrentResume(t *testing.T) {
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) {
			ctx := context.Background()
			st := openStore(t, b.dsn(t))
			id := interruptedRun(t, st, "after_model#2")
			a, err := Stored(ctx, st, id, WithTools(durableTools(t, ledger{filepath.Join(t.TempDir(), "l")}, true, nil)))
			if err != nil {
				t.Fatal(err)
			}
			errs := make([]error, 2)
			sessions := make([]*Session, 2)
			var wg sync.WaitGroup
			for i := range 2 {
				wg.Go(func() { sessions[i], errs[i] = a.Resume(ctx, st, id) })
			}
			wg.Wait()
			won := slices.IndexFunc(errs, func(err error) bool { return err == nil })
			lost := 1 - won
			if won < 0 || errs[lost] == nil || !errors.Is(errs[lost], store.ErrHeld) || !errors.Is(errs[lost], ErrNotResumable) {
				t.Fatalf("resumes = %v; want one to win and the other to find the run held", errs)
			}
			res, err := sessions[won].Run(ctx)
			if err != nil || !res.Success {
				t.Fatalf("the winner's run: %v", err)
			}
			if _, err := a.Resume(ctx, st, id); !errors.Is(err, ErrNotResumable) {
				t.Errorf("resuming a completed run = %v, want ErrNotResumable", err)
			}
		})
	}
}

func TestStoreStatus(t *testing.T) {
	cost := 0.5
	for _, tc := range []struct {
		res  Result
		want store.Status
	}{
		{Result{TerminateReason: ReasonCompleted, Outcome: OutcomeSuccess}, store.Completed},
		{Result{TerminateReason: ReasonAwaitingApproval, Error: &ErrorInfo{Message: "waits"}}, store.AwaitingApproval},
		{Result{TerminateReason: ReasonAborted, Error: &ErrorInfo{Message: "aborted"}}, store.Aborted},
		{Result{TerminateReason: ReasonMaxTurns, Error: &ErrorInfo{Message: "max turns"}}, store.Failed},
	} {
		tc.res.Iterations, tc.res.EstimatedCost = 3, &cost
		status, sum := tc.res.StoreStatus()
		if status != tc.want || sum.Turns != 3 || sum.CostUSD != &cost {
			t.Errorf("%s: %s %+v, want %s", tc.res.TerminateReason, status, sum, tc.want)
		}
		if tc.res.Error != nil && sum.Error != tc.res.Error.Message {
			t.Errorf("%s: summary error %q", tc.res.TerminateReason, sum.Error)
		}
	}
}
