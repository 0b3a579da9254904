package llm

import (
	"context"
	"time"
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
// of net/http/httptrace: a run is one, and needs no allocation to be
// told. TraceFuncs makes one of functions.
type Trace interface {
	// Retry is called before each wait for a retry.
	Retry(RetryInfo)
	// Fallback is called when a Router gives up on a model for the next.
	Fallback(FallbackInfo)
}

// TraceFuncs is a Trace of functions; either may be nil.
type TraceFuncs struct {
	OnRetry    func(RetryInfo)
	OnFallback func(FallbackInfo)
}

// Retry calls OnRetry, if set.
func (t *TraceFuncs) Retry(i RetryInfo) {
	if t.OnRetry != nil {
		t.OnRetry(i)
	}
}

// Fallback calls OnFallback, if set.
func (t *TraceFuncs) Fallback(i FallbackInfo) {
	if t.OnFallback != nil {
		t.OnFallback(i)
	}
}

type traceKey struct{}

// WithTrace returns a context that carries t to the model calls made
// with it.
func WithTrace(ctx context.Context, t Trace) context.Context {
	return context.WithValue(ctx, traceKey{}, t)
}

// TraceFrom returns the Trace carried by ctx, or nil.
func TraceFrom(ctx context.Context) Trace {
	t, _ := ctx.Value(traceKey{}).(Trace)
	return t
}
