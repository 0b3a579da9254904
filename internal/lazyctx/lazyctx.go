// Package lazyctx gives a call a deadline without arming a timer until the
// callee looks at it. Most tool and model calls of a fast run return
// without ever waiting on their context; for them a context.WithTimeout
// is four allocations and a timer inserted and removed for nothing.
//
// A Ctx behaves as the context.WithDeadlineCause it stands for: the first
// call of Done, of Err once something has ended, or of Value with the standard library's internal key
// (how context.Cause and derived contexts find their parent) creates that
// very context, with the same parent, deadline and cause, and every
// observation from then on is its own. Deadline, Value with any other key
// and Err while nothing has ended are answered as it would answer them,
// without creating it.
package lazyctx

import (
	"context"
	"sync"
	"sync/atomic"
	"time"
)

// Ctx is a context with a deadline, created on first observation.
type Ctx struct {
	parent context.Context
	d      time.Time
	cause  error

	real     atomic.Pointer[context.Context]
	released atomic.Bool
	mu       sync.Mutex
	stop     context.CancelFunc
}

// WithTimeout returns a context that ends d from now, like
// context.WithTimeoutCause(parent, d, cause) (cause may be nil). Call
// Release when the call is over, as one calls the CancelFunc.
func WithTimeout(parent context.Context, d time.Duration, cause error) *Ctx {
	return &Ctx{parent: parent, d: time.Now().Add(d), cause: cause}
}

// Unused reports whether c is a zero Ctx, never initialised.
func (c *Ctx) Unused() bool { return c.parent == nil }

// Init makes the zero Ctx c what WithTimeout returns, in place: for a Ctx
// kept in a struct that is allocated anyway. A Ctx is used once: Init
// must not be called again on one that was handed out.
func (c *Ctx) Init(parent context.Context, d time.Duration, cause error) {
	c.InitAt(parent, time.Now().Add(d), cause)
}

// InitAt is Init with the deadline given: for a caller that read the
// clock already.
func (c *Ctx) InitAt(parent context.Context, deadline time.Time, cause error) {
	c.parent, c.d, c.cause = parent, deadline, cause
}

func (c *Ctx) ctx() context.Context {
	if p := c.real.Load(); p != nil {
		return *p
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if p := c.real.Load(); p != nil {
		return *p
	}
	ctx, stop := context.WithDeadlineCause(c.parent, c.d, c.cause)
	if c.released.Load() {
		stop() // released before anyone looked: as the real one would be
	}
	c.stop = stop
	c.real.Store(&ctx)
	return ctx
}

// Deadline is the earlier of the parent's deadline and the Ctx's.
func (c *Ctx) Deadline() (time.Time, bool) {
	if pd, ok := c.parent.Deadline(); ok && pd.Before(c.d) {
		return pd, true
	}
	return c.d, true
}

// Done is the channel of the underlying context.
func (c *Ctx) Done() <-chan struct{} { return c.ctx().Done() }

// Err is the error of the underlying context. While the parent lives, the
// deadline is ahead and Release was not called, that is nil, and nothing
// needs creating to say so: callees that only poll Err stay cheap. The
// deadline is compared on the monotonic clock alone (time.Until), one
// clock read where time.Now makes two.
func (c *Ctx) Err() error {
	if c.real.Load() == nil && !c.released.Load() && c.parent.Err() == nil && time.Until(c.d) > 0 {
		return nil
	}
	return c.ctx().Err()
}

// Value looks key up in the parent, as a context with a deadline does for
// every key but the standard library's own (a *int), which it answers.
func (c *Ctx) Value(key any) any {
	if _, internal := key.(*int); internal {
		return c.ctx().Value(key)
	}
	return c.parent.Value(key)
}

// Release ends the context, as its CancelFunc would, and frees its timer.
func (c *Ctx) Release() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.released.Store(true)
	if c.stop != nil {
		c.stop()
	}
}

// Expired reports whether the deadline has passed while the parent was
// still alive: the call ran out of its own time. It creates nothing.
func (c *Ctx) Expired() bool {
	if c.parent.Err() != nil {
		return false
	}
	if pd, ok := c.parent.Deadline(); ok && pd.Before(c.d) {
		return false // the parent's time, not the call's
	}
	if p := c.real.Load(); p != nil {
		return (*p).Err() == context.DeadlineExceeded
	}
	return time.Until(c.d) <= 0
}
