package lazyctx

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

type key struct{}

var errCall = errors.New("call timed out")

// pair is a context.WithTimeoutCause and a Ctx made alike.
type pair struct {
	eager, lazy context.Context
	cancel      context.CancelFunc
	l           *Ctx
}

func newPair(parent context.Context, d time.Duration, cause error) pair {
	l := WithTimeout(parent, d, cause)
	e, cancel := context.WithDeadlineCause(parent, l.d, cause)
	return pair{eager: e, lazy: l, cancel: cancel, l: l}
}

func (p pair) release() { p.cancel(); p.l.Release() }

func isDone(ctx context.Context) bool {
	select {
	case <-ctx.Done():
		return true
	default:
		return false
	}
}

// same compares every observation of the two contexts, and of a context
// derived from each.
func same(t *testing.T, step string, p pair) {
	t.Helper()
	ed, eok := p.eager.Deadline()
	ld, lok := p.lazy.Deadline()
	if !ed.Equal(ld) || eok != lok {
		t.Errorf("%s: Deadline %v %v, want %v %v", step, ld, lok, ed, eok)
	}
	if e, l := p.eager.Err(), p.lazy.Err(); e != l {
		t.Errorf("%s: Err %v, want %v", step, l, e)
	}
	if e, l := context.Cause(p.eager), context.Cause(p.lazy); e != l {
		t.Errorf("%s: Cause %v, want %v", step, l, e)
	}
	if e, l := p.eager.Value(key{}), p.lazy.Value(key{}); e != l {
		t.Errorf("%s: Value %v, want %v", step, l, e)
	}
	if e, l := isDone(p.eager), isDone(p.lazy); e != l {
		t.Errorf("%s: Done closed %v, want %v", step, l, e)
	}
	ec, ecancel := context.WithCancel(p.eager)
	lc, lcancel := context.WithCancel(p.lazy)
	defer ecancel()
	defer lcancel()
	if e, l := ec.Err(), lc.Err(); e != l {
		t.Errorf("%s: a child's Err %v, want %v", step, l, e)
	}
	if e, l := context.Cause(ec), context.Cause(lc); e != l {
		t.Errorf("%s: a child's Cause %v, want %v", step, l, e)
	}
}

func TestBehavesLikeWithTimeoutCause(t *testing.T) {
	base := context.WithValue(context.Background(), key{}, "v")
	for _, cause := range []error{nil, errCall} {
		name := "cause"
		if cause == nil {
			name = "no cause"
		}
		t.Run(name+"/deadline passes", func(t *testing.T) {
			p := newPair(base, 20*time.Millisecond, cause)
			defer p.release()
			same(t, "before", p)
			<-p.eager.Done()
			<-p.lazy.Done()
			same(t, "after", p)
		})
		t.Run(name+"/deadline passes unobserved", func(t *testing.T) {
			p := newPair(base, 5*time.Millisecond, cause)
			defer p.release()
			<-p.eager.Done() // the lazy one is first looked at after its deadline
			same(t, "after", p)
			if !p.l.Expired() {
				t.Error("not expired")
			}
		})
		t.Run(name+"/parent cancelled", func(t *testing.T) {
			parent, cancel := context.WithCancelCause(base)
			p := newPair(parent, time.Hour, cause)
			defer p.release()
			same(t, "before", p)
			cancel(errors.New("user left")) // cancels its children before it returns
			same(t, "after", p)
			if p.l.Expired() {
				t.Error("expired on the parent's cancellation")
			}
		})
		t.Run(name+"/parent cancelled unobserved", func(t *testing.T) {
			parent, cancel := context.WithCancelCause(base)
			p := newPair(parent, time.Hour, cause)
			defer p.release()
			cancel(errors.New("user left"))
			same(t, "after", p)
		})
		t.Run(name+"/parent has the earlier deadline", func(t *testing.T) {
			parent, cancel := context.WithTimeout(base, 10*time.Millisecond)
			defer cancel()
			p := newPair(parent, time.Hour, cause)
			defer p.release()
			same(t, "before", p)
			// The parent closes its channel before it cancels its
			// children, so wait for both, as for any context.
			<-parent.Done()
			<-p.eager.Done()
			<-p.lazy.Done()
			same(t, "after", p)
			if p.l.Expired() {
				t.Error("expired on the parent's deadline")
			}
		})
		t.Run(name+"/released", func(t *testing.T) {
			p := newPair(base, time.Hour, cause)
			same(t, "before", p)
			p.release()
			same(t, "after", p)
		})
		t.Run(name+"/released unobserved", func(t *testing.T) {
			p := newPair(base, time.Hour, cause)
			p.release()
			same(t, "after", p)
			if p.l.Expired() {
				t.Error("a released call expired")
			}
		})
		t.Run(name+"/already past", func(t *testing.T) {
			p := newPair(base, -time.Second, cause)
			defer p.release()
			same(t, "at once", p)
		})
	}
}

// TestAfterFuncAndConcurrentObservers: context.AfterFunc runs on the
// deadline, and goroutines that look at once all see one context.
func TestAfterFuncAndConcurrentObservers(t *testing.T) {
	l := WithTimeout(context.Background(), 10*time.Millisecond, errCall)
	defer l.Release()
	fired := make(chan struct{})
	context.AfterFunc(l, func() { close(fired) })
	var wg sync.WaitGroup
	chans := make([]<-chan struct{}, 8)
	for i := range chans {
		wg.Go(func() { chans[i] = l.Done() })
	}
	wg.Wait()
	for _, ch := range chans {
		if ch != chans[0] {
			t.Fatal("observers saw different contexts")
		}
	}
	<-fired
	if context.Cause(l) != errCall || l.Err() != context.DeadlineExceeded {
		t.Errorf("cause %v err %v", context.Cause(l), l.Err())
	}
}

// TestNothingArmedWhenUnobserved: a call that never looks costs one
// allocation.
func TestNothingArmedWhenUnobserved(t *testing.T) {
	ctx := context.Background()
	allocs := testing.AllocsPerRun(100, func() {
		l := WithTimeout(ctx, time.Minute, nil)
		_ = l.Value(key{})
		_, _ = l.Deadline()
		l.Release()
	})
	if allocs > 1 {
		t.Errorf("%.0f allocations, want 1", allocs)
	}
}

func TestErrWhileAliveCreatesNothing(t *testing.T) {
	ctx := context.Background()
	allocs := testing.AllocsPerRun(100, func() {
		l := WithTimeout(ctx, time.Minute, nil)
		if l.Err() != nil {
			t.Fatal("ended")
		}
		l.Release()
	})
	if allocs > 1 {
		t.Errorf("%.0f allocations, want 1", allocs)
	}
}
