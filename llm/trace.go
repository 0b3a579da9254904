package llm

import (
	"context"
	"net/http"
)

type traceParentKey struct{}

// WithTraceParent puts a W3C trace context ("00-TRACEID-SPANID-FLAGS")
// in ctx: the providers send it as the traceparent header of their
// requests, so that a model call joins the caller's trace.
func WithTraceParent(ctx context.Context, traceparent string) context.Context {
	if traceparent == "" {
		return ctx
	}
	return context.WithValue(ctx, traceParentKey{}, traceparent)
}

// TraceParent is the trace context WithTraceParent put in ctx, or "".
func TraceParent(ctx context.Context) string {
	tp, _ := ctx.Value(traceParentKey{}).(string)
	return tp
}

// TraceTransport sends the trace context of each request's context as its
// traceparent header (unless the request has one), for HTTP clients the
// provider SDKs take. A nil base is http.DefaultTransport.
func TraceTransport(base http.RoundTripper) http.RoundTripper {
	if base == nil {
		base = http.DefaultTransport
	}
	return traceTransport{base}
}

type traceTransport struct{ base http.RoundTripper }

func (t traceTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	if tp := TraceParent(r.Context()); tp != "" && r.Header.Get("traceparent") == "" {
		r = r.Clone(r.Context()) // a RoundTripper must not change the caller's request
		r.Header.Set("traceparent", tp)
	}
	return t.base.RoundTrip(r)
}
