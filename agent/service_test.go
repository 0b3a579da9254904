package agent

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/agentry/agentry/internal/testdb"
	"github.com/agentry/agentry/llm"
)

// gated is a model whose calls wait for a gate (or their context).
type gated struct{ gate chan struct{} }

func (g gated) Generate(ctx context.Context, _ *llm.Request) (*llm.Response, error) {
	select {
	case <-g.gate:
		return &llm.Response{Content: "done"}, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// TestServiceDrain: Stop lets a running session end on its own while its
// deadline lasts, and aborts one that does not; Health says whether the
// service takes sessions.
func TestServiceDrain(t *testing.T) {
	ctx := context.Background()
	svc := NewService(StoreRuns(openStore(t, testdb.SQLite(t))))
	if err := svc.Health(ctx); err != nil {
		t.Fatalf("Health of a running service: %v", err)
	}
	g := gated{gate: make(chan struct{})}
	a := newTestAgent(t, `{"agent_name": "d", "version": "v1", "model_name": "m"}`, g)
	type out struct {
		res *Result
		err error
	}
	start := func() chan out {
		sess, err := svc.CreateSession(a, nil)
		if err != nil {
			t.Fatal(err)
		}
		ch := make(chan out, 1)
		go func() { res, err := svc.Run(ctx, sess); ch <- out{res, err} }()
		for svc.runningCount() == 0 {
			time.Sleep(time.Millisecond)
		}
		return ch
	}
	// Drained: the session ends on its own before Stop's deadline.
	first := start()
	stopped := make(chan error, 1)
	go func() { stopped <- svc.Stop(ctx) }()
	for svc.Health(ctx) == nil {
		time.Sleep(time.Millisecond)
	}
	if err := svc.Health(ctx); !errors.Is(err, ErrStopped) {
		t.Errorf("Health of a stopping service: %v", err)
	}
	close(g.gate)
	if o := <-first; o.err != nil || o.res.TerminateReason != ReasonCompleted {
		t.Errorf("the drained session: %v, %+v", o.err, o.res)
	}
	if err := <-stopped; err != nil {
		t.Errorf("Stop after a drain: %v", err)
	}
	// Aborted: a session still running when the deadline comes.
	svc2 := NewService()
	g2 := gated{gate: make(chan struct{})}
	a2 := newTestAgent(t, `{"agent_name": "d", "version": "v1", "model_name": "m"}`, g2)
	sess, _ := svc2.CreateSession(a2, nil)
	ch := make(chan out, 1)
	go func() { res, err := svc2.Run(ctx, sess); ch <- out{res, err} }()
	for svc2.runningCount() == 0 {
		time.Sleep(time.Millisecond)
	}
	dctx, cancel := context.WithTimeout(ctx, 20*time.Millisecond)
	defer cancel()
	if err := svc2.Stop(dctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Stop past its deadline: %v", err)
	}
	if o := <-ch; !errors.Is(o.err, ErrAborted) {
		t.Errorf("the session left running: %v", o.err)
	}
}

// runningCount is how many sessions run now.
func (s *Service) runningCount() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.running)
}
