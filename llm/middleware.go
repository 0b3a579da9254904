package llm

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"time"

	"github.com/agentry/agentry/internal/lazyctx"
	"github.com/agentry/agentry/retry"
)

// Middleware wraps a Provider, in the manner of net/http handlers: it may
// look at or change the request, call next (or not), and look at or change
// the response. Middleware that should keep streaming returns a Provider
// that is also a Streamer when next is one.
type Middleware func(next Provider) Provider

// Named is implemented by providers that answer as a model other than the
// id they were opened with: a scripted file names the model it recorded.
// Pricing, and so cost budgets, use that name.
type Named interface {
	ModelName() string
}

// ProviderFunc makes a function a Provider.
type ProviderFunc func(ctx context.Context, req *Request) (*Response, error)

// Generate calls f.
func (f ProviderFunc) Generate(ctx context.Context, req *Request) (*Response, error) {
	return f(ctx, req)
}

// Chain wraps p with mws; the first is the outermost, so a request passes
// through mws[0], mws[1], ... and then p.
func Chain(p Provider, mws ...Middleware) Provider {
	for i := len(mws) - 1; i >= 0; i-- {
		p = mws[i](p)
	}
	return p
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

// Retry repeats failed calls according to policy: only failures whose Kind
// is retryable (rate limited, overloaded, transient), waiting the
// provider's Retry-After when it gives one and the policy's backoff
// otherwise. It never sleeps past the caller's deadline: when the wait
// would, the last error is returned. A stream is retried only before its
// first chunk reached the caller.
func Retry(policy retry.Policy) Middleware {
	return func(next Provider) Provider {
		if s, ok := next.(Streamer); ok {
			return &streamRetrier{retrier: retrier{next: next, policy: policy}, stream: s}
		}
		return &retrier{next: next, policy: policy}
	}
}

type retrier struct {
	next   Provider
	policy retry.Policy
}

func (r *retrier) Generate(ctx context.Context, req *Request) (*Response, error) {
	for n := 1; ; n++ {
		resp, err := r.next.Generate(ctx, req)
		if err == nil || n >= r.policy.Tries() || !shouldRetry(ctx, err) || !r.sleep(ctx, n, err) {
			return resp, err
		}
	}
}

func shouldRetry(ctx context.Context, err error) bool {
	if ctx.Err() != nil || errors.Is(err, context.Canceled) && KindOf(err) == KindUnknown {
		return false
	}
	return KindOf(err).Retryable()
}

// sleep waits before retry n and reports whether to go on.
func (r *retrier) sleep(ctx context.Context, n int, err error) bool {
	d := r.policy.Delay(n, RetryAfterOf(err))
	if dl, ok := ctx.Deadline(); ok && time.Until(dl) < d {
		return false
	}
	if t := TraceFrom(ctx); t != nil && t.Retry != nil {
		t.Retry(RetryInfo{Attempt: n, Err: err, Wait: d})
	}
	return retry.Sleep(ctx, d)
}

type streamRetrier struct {
	retrier
	stream Streamer
}

func (r *streamRetrier) Stream(ctx context.Context, req *Request) iter.Seq2[Chunk, error] {
	return func(yield func(Chunk, error) bool) {
		for n := 1; ; n++ {
			emitted := false
			var failure error
			for c, err := range r.stream.Stream(ctx, req) {
				if err != nil {
					failure = err
					break
				}
				emitted = true
				if !yield(c, nil) {
					return
				}
			}
			if failure == nil {
				return
			}
			if emitted || n >= r.policy.Tries() || !shouldRetry(ctx, failure) || !r.sleep(ctx, n, failure) {
				yield(Chunk{}, failure)
				return
			}
		}
	}
}

// Timeout bounds each call by d. A call that runs out while its caller's
// context is still live fails as a transient error, which Retry repeats.
func Timeout(d time.Duration) Middleware {
	return func(next Provider) Provider {
		if d <= 0 {
			return next
		}
		if s, ok := next.(Streamer); ok {
			return &streamTimeouter{timeouter: timeouter{next: next, d: d}, stream: s}
		}
		return &timeouter{next: next, d: d}
	}
}

type timeouter struct {
	next Provider
	d    time.Duration
}

func (t *timeouter) Generate(ctx context.Context, req *Request) (*Response, error) {
	actx := lazyctx.WithTimeout(ctx, t.d, nil)
	defer actx.Release()
	resp, err := t.next.Generate(actx, req)
	return resp, t.classify(actx, req, err)
}

func (t *timeouter) classify(actx *lazyctx.Ctx, req *Request, err error) error {
	if err != nil && actx.Expired() {
		return &APIError{Kind: KindTransient, Model: req.Model, Message: "model call timed out after " + t.d.String(), Err: err}
	}
	return err
}

type streamTimeouter struct {
	timeouter
	stream Streamer
}

func (t *streamTimeouter) Stream(ctx context.Context, req *Request) iter.Seq2[Chunk, error] {
	return func(yield func(Chunk, error) bool) {
		actx := lazyctx.WithTimeout(ctx, t.d, nil)
		defer actx.Release()
		for c, err := range t.stream.Stream(actx, req) {
			if err != nil {
				yield(Chunk{}, t.classify(actx, req, err))
				return
			}
			if !yield(c, nil) {
				return
			}
		}
	}
}

// Recover turns a panic of the provider into an error of KindUnknown, so
// that a broken provider fails the call instead of the process.
func Recover() Middleware {
	return func(next Provider) Provider {
		if s, ok := next.(Streamer); ok {
			return &streamRecoverer{recoverer: recoverer{next: next}, stream: s}
		}
		return &recoverer{next: next}
	}
}

type recoverer struct{ next Provider }

func (r *recoverer) Generate(ctx context.Context, req *Request) (resp *Response, err error) {
	defer func() {
		if p := recover(); p != nil {
			resp, err = nil, panicError(req, p)
		}
	}()
	return r.next.Generate(ctx, req)
}

func panicError(req *Request, p any) error {
	return &APIError{Kind: KindUnknown, Model: req.Model, Message: fmt.Sprintf("provider panicked: %v", p)}
}

type streamRecoverer struct {
	recoverer
	stream Streamer
}

func (r *streamRecoverer) Stream(ctx context.Context, req *Request) iter.Seq2[Chunk, error] {
	return func(yield func(Chunk, error) bool) {
		inYield := false // a panic of the caller's loop body is not ours to turn
		defer func() {
			if inYield {
				return
			}
			if p := recover(); p != nil {
				yield(Chunk{}, panicError(req, p))
			}
		}()
		for c, err := range r.stream.Stream(ctx, req) {
			inYield = true
			if !yield(c, err) {
				return
			}
			inYield = false
		}
	}
}
