package store_test

import (
	"context"
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
