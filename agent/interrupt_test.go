package agent

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/agentry/agentry/internal/testdb"
	"github.com/agentry/agentry/llm"
	"github.com/agentry/agentry/store"
)

// stalling is a model whose first call waits for its context to end, and
// whose later calls answer: a run interrupted in its model call, then
// resumed.
type stalling struct {
	calls   atomic.Int32
	entered chan struct{}
}

func (g *stalling) Generate(ctx context.Context, _ *llm.Request) (*llm.Response, error) {
	if g.calls.Add(1) == 1 {
		close(g.entered)
		<-ctx.Done()
		return nil, context.Cause(ctx)
	}
	return &llm.Response{Content: "finished"}, nil
}

// TestInterrupt: an interrupted run ends with ErrInterrupted, keeps its
// log unended (no run_end, no Result), is reported interrupted, and
// resumes to its end.
func TestInterrupt(t *testing.T) {
	ctx := context.Background()
	st := openStore(t, testdb.SQLite(t))
	m := &stalling{entered: make(chan struct{})}
	a, err := New(mustSpec(t, `{"agent_name": "g", "version": "v1", "model_name": "m"}`), WithProvider(m, "test"))
	if err != nil {
		t.Fatal(err)
	}
	sess, err := a.NewSession(map[string]any{"task": "t"}, WithStore(st))
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { _, err := sess.Run(ctx); done <- err }()
	<-m.entered
	sess.Interrupt()
	if err := <-done; !errors.Is(err, ErrInterrupted) {
		t.Fatalf("err = %v", err)
	}
	run, err := st.Get(ctx, sess.RunID())
	if err != nil || run.Status != store.Interrupted {
		t.Fatalf("status %v, %v", run.Status, err)
	}
	recs, _ := st.Records(ctx, sess.RunID(), 0)
	for _, r := range recs {
		if r.Kind == store.KindResult || strings.Contains(string(r.Data), `"type":"run_end"`) {
			t.Errorf("the interrupted run's log has an end: %s", r.Data)
		}
	}
	again, err := a.Resume(ctx, st, sess.RunID())
	if err != nil {
		t.Fatal(err)
	}
	res, err := again.Run(ctx)
	if err != nil || res.Result != "finished" {
		t.Fatalf("resumed: %v, %v", res, err)
	}
	if run, _ := st.Get(ctx, sess.RunID()); run.Status != store.Completed {
		t.Errorf("after resume: %s", run.Status)
	}
}
