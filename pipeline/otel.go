package pipeline

import (
	"context"
	"strings"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	semconv "go.opentelemetry.io/otel/semconv/v1.41.0"
	"go.opentelemetry.io/otel/semconv/v1.41.0/genaiconv"
	oteltrace "go.opentelemetry.io/otel/trace"

	"github.com/agentry/agentry/agent"
	"github.com/agentry/agentry/internal/telemetry"
)

// WithTracerProvider sets where the pipeline's spans go: an
// invoke_workflow span per run, with its stages' invoke_agent spans as
// children. Without it a run traces through the global provider when a
// program has set one (otel.SetTracerProvider), or when it starts inside
// a recording span, and costs nothing otherwise.
func WithTracerProvider(tp oteltrace.TracerProvider) Option {
	return func(o *options) { o.tracers = tp }
}

// startSpan opens the run's invoke_workflow span, a child of the span in
// ctx or of the caller's traceparent. A run without a trace id of its own
// takes the span's.
func (r *runState) startSpan(ctx context.Context, env *Envelope) context.Context {
	tr := telemetry.Tracer(ctx, r.p.tracers)
	if tr == nil {
		return ctx
	}
	d := r.p.def
	ctx = telemetry.Join(ctx, r.set.TraceParent, r.set.TraceState)
	ctx, r.span = tr.Start(ctx, string(genaiconv.OperationNameInvokeWorkflow)+" "+d.PipelineName,
		oteltrace.WithSpanKind(oteltrace.SpanKindInternal), oteltrace.WithAttributes(
			semconv.GenAIOperationNameKey.String(string(genaiconv.OperationNameInvokeWorkflow)),
			semconv.GenAIWorkflowNameKey.String(d.PipelineName), attribute.String("agentry.workflow.version", d.Version),
			semconv.GenAIConversationID(env.ID), attribute.String("agentry.run_id", r.runID)))
	if sc := r.span.SpanContext(); sc.IsValid() && r.set.TraceID == "" {
		r.set.TraceID = sc.TraceID().String()
	}
	return ctx
}

// serviceSpan opens the invoke_agent span of a stage whose Go hook does
// its work (an agent's run has its own), and returns what closes it.
func (r *runState) serviceSpan(ctx context.Context, st *stage) (context.Context, func(error)) {
	if r.span == nil {
		return ctx, func(error) {}
	}
	name, version, _ := strings.Cut(st.name, "@") // NAME@VERSION
	ctx, span := r.span.TracerProvider().Tracer(telemetry.Name).Start(ctx, string(genaiconv.OperationNameInvokeAgent)+" "+name,
		oteltrace.WithSpanKind(oteltrace.SpanKindInternal), oteltrace.WithAttributes(
			semconv.GenAIOperationNameKey.String(string(genaiconv.OperationNameInvokeAgent)),
			semconv.GenAIAgentName(name), semconv.GenAIAgentVersion(version), attribute.String("agentry.stage", st.def.Name)))
	return ctx, func(err error) {
		if err != nil {
			span.SetAttributes(semconv.ErrorTypeKey.String(agent.CodeToolError))
			span.SetStatus(codes.Error, r.p.red.String(err.Error()))
		}
		span.End()
	}
}

// endSpan closes the run's span with its usage, path and ending.
func (r *runState) endSpan(res *agent.Result) {
	if r.span == nil {
		return
	}
	s := r.span
	s.SetAttributes(semconv.GenAIUsageInputTokens(res.TokenUsage.PromptTokens), semconv.GenAIUsageOutputTokens(res.TokenUsage.CompletionTokens),
		attribute.String("agentry.outcome", string(res.Outcome)), attribute.Int("agentry.hops", res.Iterations))
	if res.Error != nil {
		s.SetAttributes(semconv.ErrorTypeKey.String(res.Error.Code))
		s.SetStatus(codes.Error, r.p.red.String(res.Error.Message))
	}
	s.End()
}
