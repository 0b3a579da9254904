// OpenTelemetry spans by the GenAI semantic conventions: invoke_agent for
// a run, chat for each model call, execute_tool for each tool call. The
// names come from the semconv v1.41.0 packages (docs/decisions.md).

package agent

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"strconv"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	semconv "go.opentelemetry.io/otel/semconv/v1.41.0"
	"go.opentelemetry.io/otel/semconv/v1.41.0/genaiconv"
	oteltrace "go.opentelemetry.io/otel/trace"

	"github.com/agentry/agentry/policy"
	"github.com/agentry/agentry/tool"
)

// instrumentation is the name agentry's tracer and meter go by.
const instrumentation = "github.com/agentry/agentry/agent"

// unsetGlobal is the global TracerProvider as it is before a program sets
// one: a run that was given no provider traces through the global one
// only once it is something else, so that nothing is built, not even a
// non-recording span, when nobody collects.
var unsetGlobal = otel.GetTracerProvider()

// CaptureContentEnv names the environment variable that, set to true,
// puts message contents and tool arguments and results on spans
// (redacted as the Result is). Off by default: a span leaves the process.
const CaptureContentEnv = "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT"

// WithTracerProvider sets where the agent's spans go. Without it a run
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
	content bool // CaptureContentEnv
	agent   [3]attribute.KeyValue
}

// tracerOf is the tracer a run of a uses, or nil when nobody traces: the
// agent's provider, else the global one once set, else the provider of
// the recording span the run starts in (a sub-agent's or a pipeline
// stage's run is traced when its caller is).
func (a *Agent) tracerOf(ctx context.Context) oteltrace.Tracer {
	tp := a.o.tracers
	if tp == nil {
		if tp = otel.GetTracerProvider(); tp == unsetGlobal {
			span := oteltrace.SpanFromContext(ctx)
			if !span.IsRecording() {
				return nil
			}
			tp = span.TracerProvider()
		}
	}
	return tp.Tracer(instrumentation)
}

// tracing says whether a run of a would be traced.
func (a *Agent) tracing() bool {
	return a.o.tracers != nil || otel.GetTracerProvider() != unsetGlobal
}

// startSpan opens the run's invoke_agent span, a child of the span in
// ctx or of the caller's traceparent. A run without a trace id of its own
// takes the span's, so that its Result and events name the trace that
// was exported.
func (r *run) startSpan(ctx context.Context) context.Context {
	tracer := r.s.agent.tracerOf(ctx)
	if tracer == nil {
		return ctx
	}
	info, st, a := r.info, r.st, r.a
	if !oteltrace.SpanContextFromContext(ctx).IsValid() && info.TraceParent != "" {
		if sc, ok := parseTraceParent(info.TraceParent); ok {
			ctx = oteltrace.ContextWithRemoteSpanContext(ctx, sc)
		}
	}
	o := &runSpan{tracer: tracer, content: captureContent()}
	o.agent = [3]attribute.KeyValue{semconv.GenAIAgentName(st.AgentName), semconv.GenAIAgentVersion(st.AgentVersion),
		semconv.GenAIConversationID(st.SessionID)}
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
		info.TraceID, info.TraceParent = sc.TraceID().String(), traceParentOf(sc)
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
		if r == nil || r.otel == nil {
			return next(ctx, call)
		}
		o := r.otel
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

func captureContent() bool {
	on, _ := strconv.ParseBool(os.Getenv(CaptureContentEnv))
	return on
}

// parseTraceParent is the remote span context of a W3C traceparent.
func parseTraceParent(tp string) (oteltrace.SpanContext, bool) {
	if _, err := traceIDOf(tp); err != nil {
		return oteltrace.SpanContext{}, false
	}
	tid, err1 := oteltrace.TraceIDFromHex(tp[3:35])
	sid, err2 := oteltrace.SpanIDFromHex(tp[36:52])
	if err1 != nil || err2 != nil {
		return oteltrace.SpanContext{}, false
	}
	flags, _ := strconv.ParseUint(tp[53:55], 16, 8) // checked by traceIDOf
	return oteltrace.NewSpanContext(oteltrace.SpanContextConfig{TraceID: tid, SpanID: sid,
		TraceFlags: oteltrace.TraceFlags(flags) & oteltrace.FlagsSampled, Remote: true}), true
}

// traceParentOf is the W3C traceparent of sc.
func traceParentOf(sc oteltrace.SpanContext) string {
	flags := "00"
	if sc.IsSampled() {
		flags = "01"
	}
	return "00-" + sc.TraceID().String() + "-" + sc.SpanID().String() + "-" + flags
}
