package temporal

import (
	"context"
	"strings"

	"go.opentelemetry.io/otel/trace"
	temporalotel "go.temporal.io/sdk/contrib/opentelemetry"
	"go.temporal.io/sdk/interceptor"
)

// Tracing is the OpenTelemetry interceptor of a client (and the workers
// made from it) whose spans are replay-safe: Temporal's own interceptor
// (StartWorkflow, StartActivity and RunActivity spans, the trace carried
// in the workflow's and activities' headers), without its RunWorkflow
// span, which it starts again each time a worker replays the workflow.
// Spans that workflow code starts are started once, when it first runs;
// the agent's spans (invoke_agent, chat, execute_tool) are children of
// the activities that run them.
func Tracing(tp trace.TracerProvider) (interceptor.Interceptor, error) {
	return temporalotel.NewTracingInterceptor(temporalotel.TracerOptions{
		Tracer: tp.Tracer("github.com/agentry/agentry/temporal"),
		SpanStarter: func(ctx context.Context, t trace.Tracer, name string, opts ...trace.SpanStartOption) trace.Span {
			if strings.HasPrefix(name, "RunWorkflow:") {
				return trace.SpanFromContext(ctx) // the caller's span goes on: nothing is started on replay
			}
			ctx, span := t.Start(ctx, name, opts...)
			_ = ctx
			return span
		},
	})
}
