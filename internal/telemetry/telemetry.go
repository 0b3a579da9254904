// Package telemetry is what agentry's traced packages share of
// OpenTelemetry: which tracer a run uses, and W3C trace contexts.
package telemetry

import (
	"context"
	"os"
	"strconv"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
)

// Name is the instrumentation scope of agentry's tracers and meters.
const Name = "github.com/agentry/agentry"

// CaptureContentEnv names the environment variable that, set to true,
// puts message contents and tool arguments and results on spans.
const CaptureContentEnv = "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT"

// unsetGlobal is the global TracerProvider as it is before a program sets
// one: a run given no provider traces through the global one only once it
// is something else, so that nothing is built, not even a non-recording
// span, when nobody collects.
var unsetGlobal = otel.GetTracerProvider()

// Tracing says whether a run given tp (nil: none) would be traced
// without a recording span in its context.
func Tracing(tp trace.TracerProvider) bool {
	return tp != nil || otel.GetTracerProvider() != unsetGlobal
}

// Tracer is the tracer of a run given tp (nil: none), or nil when nobody
// traces: tp, else the global provider once set, else the provider of the
// recording span the run starts in (a sub-run is traced when its caller
// is).
func Tracer(ctx context.Context, tp trace.TracerProvider) trace.Tracer {
	if tp == nil {
		if tp = otel.GetTracerProvider(); tp == unsetGlobal {
			span := trace.SpanFromContext(ctx)
			if !span.IsRecording() {
				return nil
			}
			tp = span.TracerProvider()
		}
	}
	return tp.Tracer(Name)
}

// CaptureContent says whether CaptureContentEnv is true.
func CaptureContent() bool {
	on, _ := strconv.ParseBool(os.Getenv(CaptureContentEnv))
	return on
}

// Join puts the caller's trace context, a W3C traceparent and
// tracestate, in ctx as the remote parent of the spans started from it,
// unless ctx has a span.
func Join(ctx context.Context, traceparent, tracestate string) context.Context {
	if traceparent == "" || trace.SpanContextFromContext(ctx).IsValid() {
		return ctx
	}
	if sc, ok := Parse(traceparent, tracestate); ok {
		return trace.ContextWithRemoteSpanContext(ctx, sc)
	}
	return ctx
}

// Parse is the remote span context of a W3C traceparent
// ("00-TRACEID-SPANID-FLAGS") and tracestate, read by OpenTelemetry's
// TraceContext propagator: a later version's traceparent is read as the
// recommendation says (its first four fields), version ff and a zero
// trace or span id are refused, and a malformed tracestate is dropped.
func Parse(tp, ts string) (trace.SpanContext, bool) {
	if tp == "" {
		return trace.SpanContext{}, false
	}
	carrier := propagation.MapCarrier{"traceparent": tp}
	if ts != "" {
		carrier["tracestate"] = ts
	}
	ctx := propagation.TraceContext{}.Extract(context.Background(), carrier)
	sc := trace.SpanContextFromContext(ctx)
	return sc, sc.IsValid()
}

// TraceParent is the W3C traceparent of sc.
func TraceParent(sc trace.SpanContext) string {
	flags := "00"
	if sc.IsSampled() {
		flags = "01"
	}
	return "00-" + sc.TraceID().String() + "-" + sc.SpanID().String() + "-" + flags
}
