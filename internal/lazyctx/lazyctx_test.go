package lazyctx

import (
	"context"
	"errors"
	"testing"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestDeadlineFiresDone(t *testing.T) {
	c := WithTimeout(context.Background(), 5*time.Millisecond)
	defer c.Cancel()
	<-c.Done()
	if !errors.Is(c.Err(), context.DeadlineExceeded) {
		t.Errorf("Err = %v", c.Err())
	}
}

func TestErrWithoutDone(t *testing.T) {
	c := WithTimeout(context.Background(), time.Nanosecond)
	defer c.Cancel()
	time.Sleep(time.Millisecond)
	if !errors.Is(c.Err(), context.DeadlineExceeded) {
		t.Errorf("Err = %v", c.Err())
	}
	select {
	case <-c.Done():
	default:
		t.Error("Done not closed after Err reported the deadline")
	}
}

func TestParentCancel(t *testing.T) {
	parent, cancel := context.WithCancel(context.Background())
	c := WithTimeout(parent, time.Hour)
	defer c.Cancel()
	done := c.Done()
	cancel()
	<-done
	if !errors.Is(c.Err(), context.Canceled) {
		t.Errorf("Err = %v", c.Err())
	}
	// A parent already done before Done is called.
	c2 := WithTimeout(parent, time.Hour)
	defer c2.Cancel()
	if !errors.Is(c2.Err(), context.Canceled) {
		t.Errorf("Err = %v", c2.Err())
	}
	<-c2.Done()
}

func TestCancelAndDeadline(t *testing.T) {
	parent, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c := WithTimeout(parent, time.Hour)
	if d, _ := c.Deadline(); time.Until(d) > 2*time.Minute {
		t.Errorf("deadline %v is not the parent's earlier one", d)
	}
	c.Done()
	c.Cancel()
	if !errors.Is(c.Err(), context.Canceled) {
		t.Errorf("Err = %v", c.Err())
	}
	<-c.Done()
	c.Cancel() // twice is fine
	// Values pass through.
	type key struct{}
	v := WithTimeout(context.WithValue(context.Background(), key{}, 7), time.Hour)
	defer v.Cancel()
	if v.Value(key{}) != 7 {
		t.Error("value lost")
	}
	// A child context of a Ctx is cancelled with it.
	w := WithTimeout(context.Background(), time.Hour)
	child, stop := context.WithCancel(w)
	defer stop()
	w.Cancel()
	<-child.Done()
}

func TestCostsOneAllocationUnwaited(t *testing.T) {
	ctx := context.Background()
	if n := testing.AllocsPerRun(100, func() {
		c := WithTimeout(ctx, time.Minute)
		_ = c.Err()
		c.Cancel()
	}); n != 1 {
		t.Errorf("%v allocations", n)
	}
}
