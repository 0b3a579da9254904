package llm

import (
	"context"
	"net/http"
)

type traceContextKey struct{}

// traceContext is a W3C trace context: its traceparent header and its
// tracestate header (the vendors' entries, passed on as received).
type traceContext struct{ parent, state string }

// WithTraceContext puts a W3C trace context in ctx: its traceparent
// ("00-TRACEID-SPANID-FLAGS") and its tracestate ("" for none). The
// providers send them as the headers of their requests, so that a model
// call joins the caller's trace.
func WithTraceContext(ctx context.Context, traceparent, tracestate string) context.Context {
	if traceparent == "" {
		return ctx
	}
	return context.WithValue(ctx, traceContextKey{}, traceContext{traceparent, tracestate})
}

// TraceContext is the trace context WithTraceContext put in ctx, or "".
func TraceContext(ctx context.Context) (traceparent, tracestate string) {
	tc, _ := ctx.Value(traceContextKey{}).(traceContext)
	return tc.parent, tc.state
}

// SetTraceHeaders sets h's traceparent and tracestate to ctx's trace
// context, unless h has a traceparent of its own (then both are the
// caller's): what a provider does to each request it sends.
func SetTraceHeaders(ctx context.Context, h http.Header) {
	tp, ts := TraceContext(ctx)
	if tp == "" || h.Get("traceparent") != "" {
		return
	}
	h.Set("traceparent", tp)
	if ts != "" {
		h.Set("tracestate", ts)
	} else {
		h.Del("tracestate")
	}
}

// TraceTransport sends the trace context of each request's context as its
// traceparent and tracestate headers (SetTraceHeaders), for HTTP clients
// the provider SDKs take. A nil base is http.DefaultTransport.
func TraceTransport(base http.RoundTripper) http.RoundTripper {
	if base == nil {
		base = http.DefaultTransport
	}
	return traceTransport{base}
}

type traceTransport struct{ base http.RoundTripper }

func (t traceTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	if tp, _ := TraceContext(r.Context()); tp != "" && r.Header.Get("traceparent") == "" {
		r = r.Clone(r.Context()) // a RoundTripper must not change the caller's request
		SetTraceHeaders(r.Context(), r.Header)
	}
	return t.base.RoundTrip(r)
}
