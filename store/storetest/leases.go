package storetest

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentry/agentry/store"
)

func testLeases(t *testing.T, s store.Store) {
	ctx := context.Background()
	mustCreate(t, s, newRun("run_a"))
	var held *store.HeldError
	err := s.Acquire(ctx, "run_a", "h2", ttl)
	if !errors.As(err, &held) || !errors.Is(err, store.ErrHeld) || held.Holder != "h1" {
		t.Fatalf("Acquire of a held run = %v, want a *HeldError naming h1", err)
	}
	if err := s.Acquire(ctx, "run_a", "h1", ttl); err != nil {
		t.Errorf("Acquire by the holder = %v", err)
	}
	if err := s.Renew(ctx, "run_a", "h1", 2*ttl); err != nil {
		t.Errorf("Renew by the holder = %v", err)
	}
	if got, _ := s.Get(ctx, "run_a"); got.LeaseUntil.Before(time.Now().Add(ttl)) {
		t.Errorf("after Renew the lease runs out at %v, want after %v", got.LeaseUntil, time.Now().Add(ttl))
	}
	if err := s.Renew(ctx, "run_a", "h2", ttl); !errors.Is(err, store.ErrLeaseLost) {
		t.Errorf("Renew by a non-holder = %v, want ErrLeaseLost", err)
	}
	if err := s.Append(ctx, store.Write{RunID: "run_a", Holder: "h1", Release: true, Status: store.AwaitingApproval}); err != nil {
		t.Fatal(err)
	}
	if err := s.Acquire(ctx, "run_a", "h2", ttl); err != nil {
		t.Errorf("Acquire of a released run = %v", err)
	}
	if got, _ := s.Get(ctx, "run_a"); got.Holder != "h2" || got.Status != store.AwaitingApproval {
		t.Errorf("after Acquire: holder %q, status %s; want h2 and the status unchanged", got.Holder, got.Status)
	}
	if err := s.Acquire(ctx, "run_missing", "h1", ttl); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("Acquire(missing) = %v, want ErrNotFound", err)
	}
	if err := s.Acquire(ctx, "run_a", "", ttl); err == nil {
		t.Error("Acquire with an empty holder: no error")
	}
}

func testExpiredLease(t *testing.T, s store.Store) {
	ctx := context.Background()
	r := newRun("run_a")
	r.LeaseUntil = time.Now().Add(-time.Second)
	mustCreate(t, s, r)
	mustCreate(t, s, newRun("run_b"))
	got, err := s.Get(ctx, "run_a")
	if err != nil {
		t.Fatal(err)
	}
	if got.Status != store.Interrupted {
		t.Errorf("a running run with an expired lease: status %s, want interrupted", got.Status)
	}
	rs, err := s.List(ctx, store.Filter{Status: store.Interrupted})
	if err != nil || len(rs) != 1 || rs[0].ID != "run_a" {
		t.Errorf("List(interrupted) = %v, %v; want run_a", rs, err)
	}
	if err := s.Acquire(ctx, "run_a", "h2", ttl); err != nil {
		t.Errorf("Acquire of an expired lease = %v", err)
	}
	if got, _ := s.Get(ctx, "run_a"); got.Status != store.Running || got.Holder != "h2" {
		t.Errorf("after taking over: status %s, holder %q; want running, h2", got.Status, got.Holder)
	}
	if err := s.Append(ctx, store.Write{RunID: "run_a", Holder: "h1"}); !errors.Is(err, store.ErrLeaseLost) {
		t.Errorf("Append by the old holder = %v, want ErrLeaseLost", err)
	}
}

// A run whose holder is a process of this machine that no longer exists
// is interrupted at once, its lease however long: Get, and List by
// status, say so (a program that lists the interrupted runs to resume
// them finds it), and its lease can be broken for the next holder.
func testDeadHolder(t *testing.T, s store.Store) {
	ctx := context.Background()
	parts := strings.Split(store.NewHolder(), "/")
	parts[2], parts[3] = "999999999", "gone" // no such pid
	dead := strings.Join(parts, "/")
	r := newRun("run_a")
	r.Holder, r.LeaseUntil = dead, time.Now().Add(time.Hour)
	mustCreate(t, s, r)
	mustCreate(t, s, newRun("run_b")) // h1: alive as far as anyone can tell
	if got, err := s.Get(ctx, "run_a"); err != nil || got.Status != store.Interrupted {
		t.Errorf("Get of a run whose holder died: %s, %v; want interrupted", got.Status, err)
	}
	if rs, err := s.List(ctx, store.Filter{Status: store.Interrupted}); err != nil || len(rs) != 1 || rs[0].ID != "run_a" {
		t.Errorf("List(interrupted) = %v, %v; want run_a", rs, err)
	}
	if rs, err := s.List(ctx, store.Filter{Status: store.Running}); err != nil || len(rs) != 1 || rs[0].ID != "run_b" {
		t.Errorf("List(running) = %v, %v; want run_b alone", rs, err)
	}
	if err := s.Break(ctx, "run_a", dead); err != nil {
		t.Errorf("Break of the dead holder's lease: %v", err)
	}
	if err := s.Acquire(ctx, "run_a", "h2", ttl); err != nil {
		t.Errorf("Acquire after the break: %v", err)
	}
}

func testBreak(t *testing.T, s store.Store) {
	ctx := context.Background()
	mustCreate(t, s, newRun("run_a"))
	if err := s.Break(ctx, "run_a", "h2"); !errors.Is(err, store.ErrLeaseLost) {
		t.Errorf("Break of another holder's lease = %v, want ErrLeaseLost", err)
	}
	if err := s.Break(ctx, "run_a", "h1"); err != nil {
		t.Fatal(err)
	}
	got, _ := s.Get(ctx, "run_a")
	if got.Status != store.Interrupted || got.Holder != "" {
		t.Errorf("after Break: status %s, holder %q; want interrupted and free", got.Status, got.Holder)
	}
	if err := s.Break(ctx, "run_missing", "h1"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("Break(missing) = %v, want ErrNotFound", err)
	}
}

func testConcurrentAcquire(t *testing.T, s store.Store) {
	ctx := context.Background()
	r := newRun("run_a")
	r.Holder, r.LeaseUntil, r.Status = "", time.Time{}, store.AwaitingApproval
	mustCreate(t, s, r)
	const n = 8
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() { errs[i] = s.Acquire(ctx, "run_a", fmt.Sprintf("h%d", i), ttl) })
	}
	wg.Wait()
	won := 0
	for i, err := range errs {
		switch {
		case err == nil:
			won++
		case !errors.Is(err, store.ErrHeld):
			t.Errorf("Acquire %d = %v, want nil or ErrHeld", i, err)
		}
	}
	if won != 1 {
		t.Errorf("%d of %d concurrent Acquires won, want exactly 1", won, n)
	}
}

func testKeepLease(t *testing.T, s store.Store) {
	ctx := context.Background()
	const ttl = 300 * time.Millisecond
	r := newRun("run_a")
	r.LeaseUntil = time.Now().Add(ttl)
	mustCreate(t, s, r)
	lost := make(chan error, 1)
	stop := store.KeepLease(s, "run_a", "h1", ttl, func(err error) { lost <- err })
	defer stop()
	time.Sleep(2 * ttl)
	if got, _ := s.Get(ctx, "run_a"); got.Status != store.Running || got.Holder != "h1" {
		t.Fatalf("after twice the lease's time: %s, %q; want it renewed", got.Status, got.Holder)
	}
	if err := s.Break(ctx, "run_a", "h1"); err != nil {
		t.Fatal(err)
	}
	if err := s.Acquire(ctx, "run_a", "h2", time.Minute); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-lost:
		if !errors.Is(err, store.ErrLeaseLost) {
			t.Errorf("lost with %v, want ErrLeaseLost", err)
		}
	case <-time.After(5 * ttl):
		t.Error("a lease taken by another holder was not reported lost")
	}
	stop()
	stop() // twice is harmless
}
