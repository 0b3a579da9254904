package llm

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"runtime/debug"
	"time"

	"github.com/agentry/agentry/internal/lazyctx"
	"github.com/agentry/agentry/retry"
)

// Retry repeats failed calls according to policy: only failures whose Kind
// is retryable (rate limited, overloaded, transient), waiting the
// provider's Retry-After when it gives one and the policy's backoff
// otherwise. It never sleeps past the caller's deadline: when the wait
// would, the last error is returned. A stream is retried only before its
// first chunk reached the caller.
func Retry(policy retry.Policy) Middleware {
	return Guard(policy, 0, false)
}

// Timeout bounds each call by d. A call that runs out while its caller's
// context is still live fails as a transient error, which Retry repeats.
func Timeout(d time.Duration) Middleware {
	if d <= 0 {
		return func(next Provider) Provider { return next }
	}
	return Guard(retry.Policy{}, d, false)
}

// Recover turns a panic of the provider into an error of KindUnknown, so
// that a broken provider fails the call instead of the process.
func Recover() Middleware {
	return Guard(retry.Policy{}, 0, true)
}

// Guard is Retry, Timeout and Recover in one layer: Chain(p, Guard(policy,
// d, true)) behaves as Chain(p, Retry(policy), Timeout(d), Recover()),
// each attempt bounded by d (none when d is 0) and a panic of p an error,
// at the cost of one layer instead of three. It is what an agent wraps
// each of its models in when no transport middleware goes between.
func Guard(policy retry.Policy, d time.Duration, recoverPanics bool) Middleware {
	return func(next Provider) Provider {
		if s, ok := next.(Streamer); ok {
			sg := &streamGuard{stream: s}
			sg.guard = guard{next: next, policy: policy, timeout: max(d, 0), recover: recoverPanics}
			return sg
		}
		return &guard{next: next, policy: policy, timeout: max(d, 0), recover: recoverPanics}
	}
}

type guard struct {
	next    Provider
	policy  retry.Policy
	timeout time.Duration // 0: no bound of its own
	recover bool
}

func (g *guard) Generate(ctx context.Context, req *Request) (*Response, error) {
	for n := 1; ; n++ {
		resp, err := g.generate(ctx, req)
		if err == nil || !g.again(ctx, n, err) {
			return resp, err
		}
	}
}

// generate makes one attempt.
func (g *guard) generate(ctx context.Context, req *Request) (resp *Response, err error) {
	if g.recover {
		defer func() {
			if p := recover(); p != nil {
				resp, err = nil, panicError(req, p)
			}
		}()
	}
	if g.timeout == 0 {
		return g.next.Generate(ctx, req)
	}
	actx := lazyctx.WithTimeout(ctx, g.timeout, nil)
	defer actx.Release()
	resp, err = g.next.Generate(actx, req)
	return resp, g.classify(actx, req, err)
}

// again reports whether attempt n, which failed with err, is to be
// repeated, after sleeping the policy's wait.
func (g *guard) again(ctx context.Context, n int, err error) bool {
	if n >= g.policy.Tries() || !shouldRetry(ctx, err) {
		return false
	}
	d := g.policy.Delay(ctx, n, RetryAfterOf(err))
	if dl, ok := ctx.Deadline(); ok && time.Until(dl) < d {
		return false
	}
	if t := TraceFrom(ctx); t != nil {
		t.Retry(RetryInfo{Attempt: n, Err: err, Wait: d})
	}
	return retry.Sleep(ctx, d)
}

func shouldRetry(ctx context.Context, err error) bool {
	if ctx.Err() != nil || errors.Is(err, context.Canceled) && KindOf(err) == KindUnknown {
		return false
	}
	return KindOf(err).Retryable()
}

// classify names a failure of an attempt that ran out of its own time.
func (g *guard) classify(actx *lazyctx.Ctx, req *Request, err error) error {
	if err != nil && actx != nil && actx.Expired() {
		return &APIError{Kind: KindTransient, Model: req.Model, Message: "model call timed out after " + g.timeout.String(), Err: err}
	}
	return err
}

func panicError(req *Request, p any) error {
	return &APIError{Kind: KindUnknown, Model: req.Model, Message: fmt.Sprintf("provider panicked: %v", p),
		Err: &PanicError{Value: p, Stack: string(debug.Stack())}}
}

// PanicError is the Err of the APIError of a provider that panicked: what
// it panicked with and where, for the run's error details and logs.
type PanicError struct {
	Value any
	Stack string
}

func (e *PanicError) Error() string { return fmt.Sprintf("panic: %v", e.Value) }

type streamGuard struct {
	guard
	stream Streamer
}

// Stream guards a stream as Generate guards a call. Its state lives in one
// object rather than in closures per attempt, because a streamed call is
// on the path of every run that has a listener.
func (g *streamGuard) Stream(ctx context.Context, req *Request) iter.Seq2[Chunk, error] {
	s := &guardedStream{g: g, ctx: ctx, req: req}
	return s.run
}

// guardedStream is one streamed call through a streamGuard.
type guardedStream struct {
	g       *streamGuard
	ctx     context.Context
	req     *Request
	yield   func(Chunk, error) bool
	actx    *lazyctx.Ctx // the attempt's bounded context, when it has one
	failure error        // why the attempt failed
	emitted bool         // a chunk of the attempt reached the caller
	inYield bool         // the caller's loop body is running
	stopped bool         // the caller stopped the loop
}

func (s *guardedStream) run(yield func(Chunk, error) bool) {
	s.yield = yield
	push := s.push
	for n := 1; ; n++ {
		s.failure, s.emitted, s.stopped = nil, false, false
		s.attempt(push)
		if s.failure == nil || s.stopped {
			return
		}
		if s.emitted || !s.g.again(s.ctx, n, s.failure) {
			yield(Chunk{}, s.failure)
			return
		}
	}
}

// attempt streams once into push.
func (s *guardedStream) attempt(push func(Chunk, error) bool) {
	g := s.g
	if g.recover {
		defer func() {
			if s.inYield {
				return // a panic of the caller's loop body is not ours to turn
			}
			if p := recover(); p != nil {
				s.failure = panicError(s.req, p)
			}
		}()
	}
	ctx := s.ctx
	if g.timeout > 0 {
		s.actx = lazyctx.WithTimeout(ctx, g.timeout, nil)
		defer s.actx.Release()
		ctx = s.actx
	}
	g.stream.Stream(ctx, s.req)(push)
}

func (s *guardedStream) push(c Chunk, err error) bool {
	if err != nil {
		s.failure = s.g.classify(s.actx, s.req, err)
		return false
	}
	s.emitted, s.inYield = true, true
	ok := s.yield(c, nil)
	s.inYield = false
	s.stopped = !ok
	return ok
}
