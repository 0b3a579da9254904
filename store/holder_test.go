package store_test

import (
	"context"
	"runtime"
	"sync/atomic"
	"testing"
	"time"

	"github.com/agentry/agentry/store"
)

// blockingLeases renews by waiting on its gate, counting each renewal.
type blockingLeases struct {
	store.Leases
	renewals atomic.Int32
	entered  chan struct{}
	gate     chan struct{}
}

func (l *blockingLeases) Renew(context.Context, string, string, time.Duration) error {
	l.renewals.Add(1)
	l.entered <- struct{}{}
	<-l.gate
	return nil
}

// TestKeepLeaseStop: stop waits for a renewal under way, and none starts
// after it.
func TestKeepLeaseStop(t *testing.T) {
	l := &blockingLeases{entered: make(chan struct{}, 8), gate: make(chan struct{})}
	stop := store.KeepLease(l, "run_a", "h1", 30*time.Millisecond, nil)
	<-l.entered // the first renewal is under way, held at the gate
	stopped := make(chan struct{})
	go func() { stop(); close(stopped) }()
	select {
	case <-stopped:
		t.Fatal("stop returned while a renewal was under way")
	case <-time.After(50 * time.Millisecond):
	}
	close(l.gate)
	<-stopped
	time.Sleep(100 * time.Millisecond) // three ticks' time
	if n := l.renewals.Load(); n != 1 {
		t.Errorf("%d renewals, want 1: a renewal ran after stop", n)
	}
	stop() // twice is harmless
}

// TestKeepLeaseKeepsNoGoroutine: a lease kept waits on a timer, not on a
// goroutine of its own, so that a thousand runs under way keep no
// thousand stacks for their leases.
func TestKeepLeaseKeepsNoGoroutine(t *testing.T) {
	const n = 50
	before := runtime.NumGoroutine()
	stops := make([]func(), n)
	for i := range stops {
		stops[i] = store.KeepLease(&blockingLeases{}, "run_a", "h1", time.Hour, nil)
	}
	grew := runtime.NumGoroutine() - before
	for _, stop := range stops {
		stop()
	}
	if grew >= n/2 {
		t.Errorf("%d leases kept added %d goroutines", n, grew)
	}
}
