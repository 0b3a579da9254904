// Package retry is the one retry policy of agentry, shared by model calls
// (llm.Retry) and tool calls (tool.Retry): exponential backoff from an
// initial wait, capped, with jitter, and a server's Retry-After honoured.
package retry

import (
	"context"
	"math/rand/v2"
	"sync"
	"time"
)

// Policy says how a failed call is repeated. The zero value makes one
// attempt and never retries.
type Policy struct {
	// Attempts is the number of tries in all, including the first.
	// Values below 1 mean 1.
	Attempts int
	// InitialBackoff is the wait before the first retry; each later wait
	// doubles, up to MaxBackoff.
	InitialBackoff time.Duration
	// MaxBackoff caps the computed wait (not a server's Retry-After, which
	// is honoured as given). 0 means no cap.
	MaxBackoff time.Duration
	// Jitter is the fraction (0..1) of each wait that is randomised, so
	// that many clients do not retry in step. 0 means no jitter.
	Jitter float64
}

// Tries returns the number of attempts the policy allows, at least 1.
func (p Policy) Tries() int { return max(p.Attempts, 1) }

// Backoff returns the wait before retry number n (1 for the first retry),
// before jitter.
func (p Policy) Backoff(n int) time.Duration {
	if n < 1 || p.InitialBackoff <= 0 {
		return 0
	}
	d := p.InitialBackoff
	for i := 1; i < n; i++ {
		d *= 2
		if p.MaxBackoff > 0 && d >= p.MaxBackoff {
			return p.MaxBackoff
		}
	}
	if p.MaxBackoff > 0 && d > p.MaxBackoff {
		d = p.MaxBackoff
	}
	return d
}

// Delay returns how long to wait before retry n: retryAfter when the
// server gave one, else the backoff with jitter applied, drawn from the
// source WithSource put in ctx, or the runtime's.
func (p Policy) Delay(ctx context.Context, n int, retryAfter time.Duration) time.Duration {
	if retryAfter > 0 {
		return retryAfter
	}
	d := p.Backoff(n)
	if p.Jitter > 0 && d > 0 {
		j := min(p.Jitter, 1)
		fixed := time.Duration(float64(d) * (1 - j))
		span := uint64(d - fixed + 1)
		var x uint64
		if src := sourceFrom(ctx); src != nil {
			x = src.Uint64() % span
		} else {
			x = rand.Uint64N(span)
		}
		d = fixed + time.Duration(x)
	}
	return d
}

type sourceKey struct{}

// WithSource makes the retries of calls made with ctx draw their jitter
// from src (a deterministic run's seeded source). A source is used by
// one goroutine at a time: give each run its own.
func WithSource(ctx context.Context, src rand.Source) context.Context {
	return context.WithValue(ctx, sourceKey{}, &lockedSource{src: src})
}

func sourceFrom(ctx context.Context) *lockedSource {
	if ctx == nil {
		return nil
	}
	s, _ := ctx.Value(sourceKey{}).(*lockedSource)
	return s
}

// lockedSource serialises a run's parallel tool calls' draws.
type lockedSource struct {
	mu  sync.Mutex
	src rand.Source
}

func (l *lockedSource) Uint64() uint64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.src.Uint64()
}

// Sleep waits d and reports whether to go on: false when ctx ends first,
// or when its deadline comes before d has passed (a retry that cannot
// finish in time is not started).
func Sleep(ctx context.Context, d time.Duration) bool {
	if dl, ok := ctx.Deadline(); ok && time.Until(dl) < d {
		return false
	}
	if d <= 0 {
		return ctx.Err() == nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}
