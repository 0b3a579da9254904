package llm

import (
	"context"
	"errors"
	"iter"
	"math/rand/v2"
	"time"

	"github.com/agentry/agentry/internal/lazyctx"
)

// RetryPolicy says how a failed model call is repeated. The zero value
// makes one attempt and never retries.
type RetryPolicy struct {
	// Attempts is the number of tries in all, including the first.
	// Values below 1 mean 1.
	Attempts int
	// InitialBackoff is the wait before the first retry; each later wait
	// doubles, up to MaxBackoff.
	InitialBackoff time.Duration
	// MaxBackoff caps the computed wait (not a provider's Retry-After,
	// which is honoured as given).
	MaxBackoff time.Duration
	// Jitter is the fraction (0..1) of each wait that is randomised so
	// that many clients do not retry in step. 0 means no jitter.
	Jitter float64
	// AttemptTimeout bounds each attempt; 0 means no bound beyond the
	// caller's context. An attempt that runs out is a transient failure.
	AttemptTimeout time.Duration
}

// DefaultRetryPolicy is what agents use unless their spec says otherwise.
var DefaultRetryPolicy = RetryPolicy{
	Attempts:       3,
	InitialBackoff: 500 * time.Millisecond,
	MaxBackoff:     20 * time.Second,
	Jitter:         0.5,
}

// Backoff returns the wait before retry number n (1 for the first retry),
// before jitter.
func (p RetryPolicy) Backoff(n int) time.Duration {
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

// wait returns how long to sleep before retry n after err.
func (p RetryPolicy) wait(n int, err error) time.Duration {
	if ra := RetryAfterOf(err); ra > 0 {
		return ra
	}
	d := p.Backoff(n)
	if p.Jitter > 0 && d > 0 {
		j := min(p.Jitter, 1)
		fixed := time.Duration(float64(d) * (1 - j))
		d = fixed + rand.N(d-fixed+1)
	}
	return d
}

// RetryInfo describes one retry, for a Trace.
type RetryInfo struct {
	// Attempt is the attempt that failed (1 for the first).
	Attempt int
	// Err is why it failed.
	Err error
	// Wait is how long the retrier sleeps before the next attempt.
	Wait time.Duration
}

// Trace receives notice of what happens inside a model call, in the style
// of net/http/httptrace. Any field may be nil.
type Trace struct {
	// Retry is called before each wait for a retry.
	Retry func(RetryInfo)
	// Fallback is called when a Router gives up on a model for the next.
	Fallback func(FallbackInfo)
}

type traceKey struct{}

// WithTrace returns a context that carries t to the model calls made
// with it.
func WithTrace(ctx context.Context, t *Trace) context.Context {
	return context.WithValue(ctx, traceKey{}, t)
}

// TraceFrom returns the Trace carried by ctx, or nil.
func TraceFrom(ctx context.Context) *Trace {
	t, _ := ctx.Value(traceKey{}).(*Trace)
	return t
}

// WithRetry returns a Provider that repeats failed calls of p according to
// policy: only failures whose Kind is retryable (rate limited, overloaded,
// transient), waiting the provider's Retry-After when it gives one and an
// exponential, jittered, capped backoff otherwise. It never sleeps past the
// caller's deadline: when the wait would, the last error is returned.
// Streaming is retried only before the first chunk was yielded.
func WithRetry(p Provider, policy RetryPolicy) Provider {
	r := &retrier{next: p, policy: policy}
	if s, ok := p.(Streamer); ok {
		return &streamRetrier{retrier: r, stream: s}
	}
	return r
}

type retrier struct {
	next   Provider
	policy RetryPolicy
}

func (r *retrier) Generate(ctx context.Context, req *Request) (*Response, error) {
	attempts := max(r.policy.Attempts, 1)
	for n := 1; ; n++ {
		resp, err := r.attempt(ctx, req)
		if err == nil {
			return resp, nil
		}
		if n >= attempts || !r.shouldRetry(ctx, err) {
			return resp, err
		}
		if !r.sleep(ctx, n, err) {
			return resp, err
		}
	}
}

func (r *retrier) attempt(ctx context.Context, req *Request) (*Response, error) {
	if r.policy.AttemptTimeout <= 0 {
		return r.next.Generate(ctx, req)
	}
	actx := lazyctx.WithTimeout(ctx, r.policy.AttemptTimeout)
	defer actx.Cancel()
	resp, err := r.next.Generate(actx, req)
	if err != nil && ctx.Err() == nil && actx.Err() != nil {
		err = &APIError{Kind: KindTransient, Model: req.Model,
			Message: "model call timed out after " + r.policy.AttemptTimeout.String(), Err: err}
	}
	return resp, err
}

func (r *retrier) shouldRetry(ctx context.Context, err error) bool {
	if isCallerDone(ctx) || errors.Is(err, context.Canceled) && KindOf(err) == KindUnknown {
		return false
	}
	return KindOf(err).Retryable()
}

// sleep waits before retry n and reports whether to go on.
func (r *retrier) sleep(ctx context.Context, n int, err error) bool {
	d := r.policy.wait(n, err)
	if dl, ok := ctx.Deadline(); ok && time.Until(dl) < d {
		return false
	}
	if t := TraceFrom(ctx); t != nil && t.Retry != nil {
		t.Retry(RetryInfo{Attempt: n, Err: err, Wait: d})
	}
	if d <= 0 {
		return ctx.Err() == nil
	}
	tm := time.NewTimer(d)
	defer tm.Stop()
	select {
	case <-tm.C:
		return true
	case <-ctx.Done():
		return false
	}
}

type streamRetrier struct {
	*retrier
	stream Streamer
}

// Stream retries a stream that fails before yielding anything; once a chunk
// has reached the caller, a failure is returned as it is.
func (r *streamRetrier) Stream(ctx context.Context, req *Request) iter.Seq2[Chunk, error] {
	return func(yield func(Chunk, error) bool) {
		attempts := max(r.policy.Attempts, 1)
		for n := 1; ; n++ {
			actx, cancel := ctx, context.CancelFunc(func() {})
			if r.policy.AttemptTimeout > 0 {
				actx, cancel = context.WithTimeout(ctx, r.policy.AttemptTimeout)
			}
			emitted := false
			var failure error
			for c, err := range r.stream.Stream(actx, req) {
				if err != nil {
					failure = err
					break
				}
				emitted = true
				if !yield(c, nil) {
					cancel()
					return
				}
			}
			timedOut := actx.Err() != nil && ctx.Err() == nil
			cancel()
			if failure == nil {
				return
			}
			if timedOut {
				failure = &APIError{Kind: KindTransient, Model: req.Model,
					Message: "model call timed out after " + r.policy.AttemptTimeout.String(), Err: failure}
			}
			if emitted || n >= attempts || !r.shouldRetry(ctx, failure) || !r.sleep(ctx, n, failure) {
				yield(Chunk{}, failure)
				return
			}
		}
	}
}
