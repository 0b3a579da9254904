package tool

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"runtime/debug"
	"time"

	"github.com/agentry/agentry/internal/lazyctx"
)

// CallOptions says how Invoke runs one call.
type CallOptions struct {
	// Timeout bounds each attempt; 0 means no bound beyond ctx.
	Timeout time.Duration
	// Attempts is the number of tries in all for a safe or idempotent tool
	// whose call fails transiently (a timeout, or an error wrapping
	// ErrTransient). Non-idempotent tools are tried once.
	Attempts int
	// Backoff is the wait before the first retry; it doubles each time.
	Backoff time.Duration
	// OnRetry, if set, is called before each retry.
	OnRetry func(attempt int, err error)
}

// Invoke runs one call of t with a timeout, turning a panic into an error
// of type "panic", and retries it as CallOptions says. It returns the
// output, the number of attempts made and the error of the last one.
func Invoke(ctx context.Context, t Tool, args json.RawMessage, o CallOptions) (json.RawMessage, int, error) {
	info := t.Info()
	attempts := 1
	if info.Idempotency.Retryable() && o.Attempts > 1 {
		attempts = o.Attempts
	}
	wait := o.Backoff
	for n := 1; ; n++ {
		out, err := invokeOnce(ctx, t, info.Name, args, o.Timeout)
		if err == nil || n >= attempts || !IsTransient(err) || ctx.Err() != nil {
			return out, n, err
		}
		if o.OnRetry != nil {
			o.OnRetry(n, err)
		}
		if wait > 0 {
			tm := time.NewTimer(wait)
			select {
			case <-tm.C:
			case <-ctx.Done():
				tm.Stop()
				return out, n, err
			}
			wait *= 2
		}
	}
}

// IsTransient reports whether a failed call may succeed if repeated.
func IsTransient(err error) bool {
	var d *ErrorDetails
	if errors.As(err, &d) {
		return d.Type == "timeout" || d.Type == "transient"
	}
	return errors.Is(err, ErrTransient) || errors.Is(err, context.DeadlineExceeded)
}

func invokeOnce(ctx context.Context, t Tool, name string, args json.RawMessage, timeout time.Duration) (out json.RawMessage, err error) {
	cctx := ctx
	if timeout > 0 {
		lc := lazyctx.WithTimeout(ctx, timeout)
		defer lc.Cancel()
		cctx = lc
	}
	defer func() {
		if r := recover(); r != nil {
			out = nil
			err = &ErrorDetails{Type: "panic", Message: fmt.Sprintf("tool %s panicked: %v", name, r),
				Details: map[string]any{"stack": string(debug.Stack())}, Recoverable: false}
		}
	}()
	out, err = t.Call(cctx, args)
	if cctx.Err() != nil && ctx.Err() == nil {
		// The call's own deadline passed: whatever it returned is late.
		return nil, &ErrorDetails{Type: "timeout", Message: fmt.Sprintf("tool %s timed out after %s", name, timeout), Recoverable: true}
	}
	if err != nil {
		return nil, err
	}
	if len(out) == 0 {
		out = json.RawMessage("null")
	}
	return out, nil
}
