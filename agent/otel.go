// OpenTelemetry spans by the GenAI semantic conventions: invoke_agent for
// a run, chat for each model call, execute_tool for each tool call. The
// names come from the semconv v1.41.0 packages (docs/decisions.md).

package agent

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	semconv "go.opentelemetry.io/otel/semconv/v1.41.0"
	"go.opentelemetry.io/otel/semconv/v1.41.0/genaiconv"
	oteltrace "go.opentelemetry.io/otel/trace"

	"github.com/agentry/agentry/internal/telemetry"
	"github.com/agentry/agentry/policy"
	"github.com/agentry/agentry/tool"
)

// WithTracerProvider sets where the agent's spans go. Message contents
// and tool arguments and results go on spans (redacted as the Result is)
// only when OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT is true:
// a span leaves the process. Without it a run
// traces through the global provider (otel.SetTracerProvider) when a
// program has set one, and costs nothing when none is set.
func WithTracerProvider(tp oteltrace.TracerProvider) Option {
	return func(o *options) { o.tracers = tp }
}

// runSpan is a traced run: its invoke_agent span and what its model and
// tool calls need to open theirs. A run has none when nobody traces.
type runSpan struct {
	tracer  oteltrace.Tracer
	span    oteltrace.Span
	content bool // telemetry.CaptureContentEnv
	agent   [3]attribute.KeyValue
}

// startSpan opens the run's invoke_agent span, a child of the span in
// ctx or of the caller's traceparent. A run without a trace id of its own
// takes the span's, so that its Result and events name the trace that
// was exported.
func (r *run) startSpan(ctx context.Context) context.Context {
	tracer := telemetry.Tracer(ctx, r.s.agent.o.tracers)
	if tracer == nil || !r.a.spec.Tracing.Records(r.s.traceKey()) {
		// Not sampled (the spec's tracing): no span either, the store's
		// decision made again by the same key, before the span could
		// give the run a trace id of its own.
		return ctx
	}
	info, st, a := r.info, r.st, r.a
	ctx = telemetry.Join(ctx, info.TraceParent, info.TraceState)
	o := &runSpan{tracer: tracer, content: telemetry.CaptureContent()}
	o.agent = [3]attribute.KeyValue{semconv.GenAIAgentName(st.AgentName), semconv.GenAIAgentVersion(st.AgentVersion),
		semconv.GenAIConversationID(cmp.Or(r.s.cfg.conversation(), st.SessionID))}
	attrs := make([]attribute.KeyValue, 0, 8)
	attrs = append(attrs, semconv.GenAIOperationNameKey.String(string(genaiconv.OperationNameInvokeAgent)),
		semconv.GenAIProviderNameKey.String(providerNameOf(a.providerName)), semconv.GenAIRequestModel(a.model),
		attribute.String("agentry.run_id", st.RunID))
	attrs = append(attrs, o.agent[:]...)
	if st.ParentRunID != "" {
		attrs = append(attrs, attribute.String("agentry.parent_run_id", st.ParentRunID))
	}
	ctx, o.span = tracer.Start(ctx, string(genaiconv.OperationNameInvokeAgent)+" "+st.AgentName,
		oteltrace.WithSpanKind(oteltrace.SpanKindInternal), oteltrace.WithAttributes(attrs...))
	if sc := o.span.SpanContext(); sc.IsValid() && info.TraceID == "" {
		info.TraceID, info.TraceParent, info.TraceState = sc.TraceID().String(), telemetry.TraceParent(sc), sc.TraceState().String()
	}
	r.otel = o
	return ctx
}

// endSpan closes the run's span with its usage and how it ended.
func (r *run) endSpan(res *Result) {
	o := r.otel
	if o == nil {
		return
	}
	u := res.TokenUsage
	o.span.SetAttributes(semconv.GenAIUsageInputTokens(u.PromptTokens), semconv.GenAIUsageOutputTokens(u.CompletionTokens),
		attribute.String("agentry.outcome", string(res.Outcome)), attribute.String("agentry.terminate_reason", string(res.TerminateReason)))
	if u.CachedPromptTokens > 0 {
		o.span.SetAttributes(semconv.GenAIUsageCacheReadInputTokens(u.CachedPromptTokens))
	}
	if res.Model != "" {
		o.span.SetAttributes(semconv.GenAIResponseModel(res.Model))
	}
	if o.content && res.Result != nil {
		if b, err := json.Marshal(res.Result); err == nil {
			o.span.SetAttributes(semconv.GenAIOutputMessagesKey.String(string(b))) // redacted with the Result
		}
	}
	if res.Error != nil {
		o.span.SetAttributes(semconv.ErrorTypeKey.String(res.Error.Code))
		o.span.SetStatus(codes.Error, res.Error.Message) // redacted with the Result
	}
	o.span.End()
}

// traceTools is the outermost tool middleware: an execute_tool span per
// call of a traced run, nothing otherwise.
func (a *Agent) traceTools(next tool.Handler) tool.Handler {
	return func(ctx context.Context, call *tool.Call) (tool.Output, error) {
		r, _ := policy.HostFrom(ctx).(*run)
		if r == nil || r.otel == nil || !r.traces(call) {
			return next(ctx, call)
		}
		return a.toolSpan(ctx, r.otel, call, next)
	}
}

// traces says whether the run traces call here: not a call of a turn it
// replays (traced when it ran), nor one it hands out or was given the
// result of (Dispatch: traced where it ran, by Exec).
func (r *run) traces(call *tool.Call) bool {
	if call.Turn < r.quiet() {
		return false
	}
	if j := r.link.journal; j != nil && j.out != nil {
		return !j.handsOut(call) // traced where it runs
	}
	return true
}

// toolSpan runs call through next in an execute_tool span of o's.
func (a *Agent) toolSpan(ctx context.Context, o *runSpan, call *tool.Call, next tool.Handler) (tool.Output, error) {
	ctx, span := o.tracer.Start(ctx, string(genaiconv.OperationNameExecuteTool)+" "+call.Name,
		oteltrace.WithSpanKind(oteltrace.SpanKindInternal), oteltrace.WithAttributes(
			semconv.GenAIOperationNameKey.String(string(genaiconv.OperationNameExecuteTool)),
			semconv.GenAIToolName(call.Name), semconv.GenAIToolCallID(call.ID), semconv.GenAIToolType("function"),
			o.agent[0], o.agent[1], o.agent[2]))
	if o.content {
		span.SetAttributes(semconv.GenAIToolCallArgumentsKey.String(string(a.redact.Bytes(call.Arguments))))
	}
	out, err := next(ctx, call)
	if err != nil {
		typ := "_OTHER"
		var d *tool.ErrorDetails
		if errors.As(err, &d) {
			typ = d.Type
		}
		span.SetAttributes(semconv.ErrorTypeKey.String(typ))
		span.SetStatus(codes.Error, a.redact.String(err.Error()))
	} else if o.content {
		span.SetAttributes(semconv.GenAIToolCallResultKey.String(string(a.redact.Bytes(out.JSON))))
	}
	span.End()
	return out, err
}

// execSpan is the span context of a call Exec runs: the agent's tracer,
// nil when nobody traces.
func (a *Agent) execSpan(ctx context.Context, run *tool.Run) *runSpan {
	tracer := telemetry.Tracer(ctx, a.o.tracers)
	if tracer == nil {
		return nil
	}
	return &runSpan{tracer: tracer, content: telemetry.CaptureContent(), agent: [3]attribute.KeyValue{
		semconv.GenAIAgentName(run.AgentName), semconv.GenAIAgentVersion(run.AgentVersion), semconv.GenAIConversationID(run.SessionID)}}
}

// providerNameOf is gen_ai.provider.name for an agentry provider name:
// the conventions' value where they have one, the name itself otherwise.
func providerNameOf(name string) string {
	switch name {
	case "openai":
		return string(genaiconv.ProviderNameOpenAI)
	case "anthropic":
		return string(genaiconv.ProviderNameAnthropic)
	case "gemini":
		return string(genaiconv.ProviderNameGCPGemini)
	}
	return name
}
