// Package lazyctx provides a timeout context that costs one allocation
// until someone waits on it.
//
// agentry bounds every tool call and model call with its own timeout. With
// context.WithTimeout each bound costs a timer, a channel and a
// registration with the parent, although most calls finish without ever
// selecting on Done. Ctx creates those only when Done is first called; Err
// and Deadline work without them.
//
// One difference from context.WithTimeout: context.Cause on a Ctx that hit
// its own deadline reports the parent's cause (nil) instead of
// context.DeadlineExceeded; Err reports DeadlineExceeded as usual.
package lazyctx

import (
	"context"
	"sync"
	"time"
)

// Ctx is a context with its own deadline. Call Cancel when done with it.
type Ctx struct {
	context.Context // the parent
	deadline        time.Time

	mu    sync.Mutex
	done  chan struct{}
	err   error
	timer *time.Timer
	stop  func() bool
}

// WithTimeout returns a context that is done d after now, when the parent
// is done, or when Cancel is called, whichever is first.
func WithTimeout(parent context.Context, d time.Duration) *Ctx {
	return &Ctx{Context: parent, deadline: time.Now().Add(d)}
}

// Deadline returns the earlier of the parent's deadline and its own.
func (c *Ctx) Deadline() (time.Time, bool) {
	if pd, ok := c.Context.Deadline(); ok && pd.Before(c.deadline) {
		return pd, true
	}
	return c.deadline, true
}

// Err returns nil until the context is done, then why.
func (c *Ctx) Err() error {
	c.mu.Lock()
	err := c.err
	c.mu.Unlock()
	if err != nil {
		return err
	}
	if err := c.Context.Err(); err != nil {
		c.finish(err)
		return err
	}
	if !time.Now().Before(c.deadline) {
		c.finish(context.DeadlineExceeded)
		return context.DeadlineExceeded
	}
	return nil
}

// Done returns a channel closed when the context is done; the first call
// starts the timer and the watch on the parent.
func (c *Ctx) Done() <-chan struct{} {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.done != nil {
		return c.done
	}
	c.done = make(chan struct{})
	if c.err != nil {
		close(c.done)
		return c.done
	}
	c.timer = time.AfterFunc(time.Until(c.deadline), func() { c.finish(context.DeadlineExceeded) })
	parent := c.Context
	c.stop = context.AfterFunc(parent, func() { c.finish(parent.Err()) })
	return c.done
}

func (c *Ctx) finish(err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.err != nil {
		return
	}
	c.err = err
	if c.done != nil {
		close(c.done)
	}
}

// Cancel ends the context and releases its timer, if it has one.
func (c *Ctx) Cancel() {
	c.finish(context.Canceled)
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.timer != nil {
		c.timer.Stop()
	}
	if c.stop != nil {
		c.stop()
	}
}
