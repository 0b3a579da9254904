package agent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"iter"
	"log/slog"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentry/agentry/internal/telemetry"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	oteltrace "go.opentelemetry.io/otel/trace"

	"github.com/agentry/agentry/event"
	"github.com/agentry/agentry/llm"
)

// otelCanary is a secret the model is shown: no span may carry it.
const otelCanary = "sk-proj-CANARYotel00000000000000000000000001"

// tracedRun runs a boss agent that calls a tool and a sub-agent, traced
// into a span recorder.
func tracedRun(t *testing.T, opts ...RunOption) (*Result, []sdktrace.ReadOnlySpan) {
	t.Helper()
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	t.Cleanup(func() { tp.Shutdown(context.Background()) })
	reg := NewRegistry()
	// The sub-agent is given no tracer: its run is traced because its
	// caller's is.
	sub := newTestAgent(t, `{"agent_name": "helper", "version": "v2", "model_name": "m", "description": "Helps."}`,
		&recorder{replies: []reply{answer("helped")}})
	if err := reg.Register(sub); err != nil {
		t.Fatal(err)
	}
	m := &recorder{replies: []reply{
		calls(call("c1", "add", `{"a": 1, "b": 2}`), call("c2", "helper", `{"task": "help with `+otelCanary+`"}`)),
		answer("3, and the key " + otelCanary)}}
	a, err := New(mustSpec(t, `{"agent_name": "boss", "version": "v1", "model_name": "m", "tools": ["add", "agent:helper"]}`),
		WithProvider(m, "openai"), WithTools(testTools(t)), WithRegistry(reg), WithTracerProvider(tp))
	if err != nil {
		t.Fatal(err)
	}
	res, err := a.Run(context.Background(), map[string]any{"task": "add, my key is " + otelCanary}, opts...)
	if err != nil {
		t.Fatal(err)
	}
	return res, rec.Ended()
}

func attrs(s sdktrace.ReadOnlySpan) map[attribute.Key]attribute.Value {
	m := map[attribute.Key]attribute.Value{}
	for _, kv := range s.Attributes() {
		m[kv.Key] = kv.Value
	}
	return m
}

// TestSpanConversation: a run of a conversation names the conversation
// as gen_ai.conversation.id, so that a trace backend groups its runs; a
// run of none names its session.
func TestSpanConversation(t *testing.T) {
	st := openStore(t, filepath.Join(t.TempDir(), "runs.db")).Store
	res, spans := tracedRun(t, WithStore(st), WithConversation("conv_7"))
	for _, s := range spans {
		if s.Name() == "invoke_agent boss" {
			if got := attrs(s)["gen_ai.conversation.id"].AsString(); got != "conv_7" || res.SessionID == "conv_7" {
				t.Errorf("gen_ai.conversation.id %q, want conv_7", got)
			}
			return
		}
	}
	t.Fatal("no invoke_agent span")
}

func TestSpans(t *testing.T) {
	res, spans := tracedRun(t)
	byName := map[string][]sdktrace.ReadOnlySpan{}
	for _, s := range spans {
		byName[s.Name()] = append(byName[s.Name()], s)
	}
	for name, n := range map[string]int{"invoke_agent boss": 1, "invoke_agent helper": 1, "chat m": 3, "execute_tool add": 1, "execute_tool helper": 1} {
		if len(byName[name]) != n {
			t.Fatalf("%d spans %q, want %d; spans: %v", len(byName[name]), name, n, byName)
		}
	}
	root, helper := byName["invoke_agent boss"][0], byName["invoke_agent helper"][0]
	tool := byName["execute_tool helper"][0]
	t.Run("parents", func(t *testing.T) {
		if root.Parent().IsValid() {
			t.Errorf("the run's span has a parent: %v", root.Parent())
		}
		if helper.Parent().SpanID() != tool.SpanContext().SpanID() {
			t.Errorf("the sub-agent's run is not a child of the tool call that made it")
		}
		if tool.Parent().SpanID() != root.SpanContext().SpanID() || byName["execute_tool add"][0].Parent().SpanID() != root.SpanContext().SpanID() {
			t.Errorf("a tool call's span is not a child of the run's")
		}
		for _, c := range byName["chat m"] {
			want := root.SpanContext().SpanID()
			if attrs(c)["gen_ai.agent.name"].AsString() == "helper" {
				want = helper.SpanContext().SpanID()
			}
			if c.Parent().SpanID() != want {
				t.Errorf("a chat span's parent is %v, want its run's %v", c.Parent().SpanID(), want)
			}
		}
		if root.SpanContext().TraceID().String() != res.TraceID {
			t.Errorf("the Result's trace id %q is not the span's %s", res.TraceID, root.SpanContext().TraceID())
		}
	})
	t.Run("attributes", func(t *testing.T) {
		ra := attrs(root)
		for k, want := range map[attribute.Key]string{"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "boss",
			"gen_ai.agent.version": "v1", "gen_ai.conversation.id": res.SessionID, "gen_ai.provider.name": "openai",
			"gen_ai.request.model": "m", "agentry.run_id": res.ID} {
			if got := ra[k].AsString(); got != want {
				t.Errorf("invoke_agent %s = %q, want %q", k, got, want)
			}
		}
		ta := attrs(byName["execute_tool add"][0])
		if ta["gen_ai.tool.name"].AsString() != "add" || ta["gen_ai.tool.call.id"].AsString() != "c1" ||
			ta["gen_ai.tool.type"].AsString() != "function" || ta["gen_ai.operation.name"].AsString() != "execute_tool" {
			t.Errorf("execute_tool attributes %v", ta)
		}
		if attrs(helper)["gen_ai.agent.version"].AsString() != "v2" {
			t.Errorf("the sub-agent's span names version %q", attrs(helper)["gen_ai.agent.version"].AsString())
		}
	})
	t.Run("tokens equal the Result's", func(t *testing.T) {
		var in, out int64
		for _, c := range byName["chat m"] {
			a := attrs(c)
			in += a["gen_ai.usage.input_tokens"].AsInt64()
			out += a["gen_ai.usage.output_tokens"].AsInt64()
			if a["gen_ai.operation.name"].AsString() != "chat" || c.SpanKind() != oteltrace.SpanKindClient {
				t.Errorf("chat span %v, kind %v", a, c.SpanKind())
			}
		}
		if in != int64(res.TokenUsage.PromptTokens) || out != int64(res.TokenUsage.CompletionTokens) {
			t.Errorf("chat spans count %d+%d tokens, the Result %+v", in, out, res.TokenUsage)
		}
		ra := attrs(root)
		if ra["gen_ai.usage.input_tokens"].AsInt64() != int64(res.TokenUsage.PromptTokens) {
			t.Errorf("invoke_agent input tokens %d, the Result's %d", ra["gen_ai.usage.input_tokens"].AsInt64(), res.TokenUsage.PromptTokens)
		}
	})
	t.Run("no content by default", func(t *testing.T) {
		for _, s := range spans {
			for _, k := range []attribute.Key{"gen_ai.input.messages", "gen_ai.output.messages", "gen_ai.tool.call.arguments", "gen_ai.tool.call.result"} {
				if _, ok := attrs(s)[k]; ok {
					t.Errorf("span %s carries %s without %s", s.Name(), k, telemetry.CaptureContentEnv)
				}
			}
		}
	})
}

// TestSpansContent: with content capture on, messages and tool calls are
// on the spans, and the secret the model was shown is not.
func TestSpansContent(t *testing.T) {
	t.Setenv(telemetry.CaptureContentEnv, "true")
	_, spans := tracedRun(t)
	seen := map[attribute.Key]bool{}
	for _, s := range spans {
		for k, v := range attrs(s) {
			seen[k] = true
			if strings.Contains(v.Emit(), "CANARYotel") {
				t.Errorf("span %s attribute %s carries the secret: %s", s.Name(), k, v.Emit())
			}
		}
		if strings.Contains(s.Status().Description, "CANARYotel") {
			t.Errorf("span %s status carries the secret", s.Name())
		}
	}
	for _, k := range []attribute.Key{"gen_ai.input.messages", "gen_ai.output.messages", "gen_ai.tool.call.arguments", "gen_ai.tool.call.result"} {
		if !seen[k] {
			t.Errorf("no span carries %s with %s=true", k, telemetry.CaptureContentEnv)
		}
	}
}

// TestSpanParent: a run joins the caller's trace, from its context or
// from a traceparent.
func TestSpanParent(t *testing.T) {
	const tp = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	res, spans := tracedRun(t, WithTraceContext(tp, ""))
	for _, s := range spans {
		if s.SpanContext().TraceID().String() != "4bf92f3577b34da6a3ce929d0e0e4736" {
			t.Errorf("span %s is in trace %s", s.Name(), s.SpanContext().TraceID())
		}
		if s.Name() == "invoke_agent boss" && s.Parent().SpanID().String() != "00f067aa0ba902b7" {
			t.Errorf("the run's parent is %s", s.Parent().SpanID())
		}
	}
	if res.TraceID != "4bf92f3577b34da6a3ce929d0e0e4736" {
		t.Errorf("trace id %q", res.TraceID)
	}
}

// chatAndRun are the chat span and the run's span of a one-call run of
// calc.
func chatAndRun(t *testing.T, rec *tracetest.SpanRecorder) (chat, run sdktrace.ReadOnlySpan) {
	t.Helper()
	for _, s := range rec.Ended() {
		switch s.Name() {
		case "chat m":
			chat = s
		case "invoke_agent calc":
			run = s
		}
	}
	if chat == nil || run == nil {
		t.Fatalf("spans %v", rec.Ended())
	}
	return chat, run
}

// tpModel answers once and keeps the traceparent its call carried, as
// a provider's HTTP request would send it.
type tpModel struct{ tp, ts string }

func (m *tpModel) Generate(ctx context.Context, req *llm.Request) (*llm.Response, error) {
	m.tp, m.ts = llm.TraceContext(ctx)
	return &llm.Response{Content: "ok", Usage: llm.Usage{PromptTokens: 1, CompletionTokens: 1}}, nil
}

// TestSpanContextOut: the model call carries its chat span as the
// traceparent of its request, and the run's log records carry the run's
// trace and span ids.
func TestSpanContextOut(t *testing.T) {
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	defer tp.Shutdown(context.Background())
	var logs strings.Builder
	m := &tpModel{}
	a, err := New(mustSpec(t, `{`+base+`}`), WithProvider(m, "test"), WithTracerProvider(tp),
		WithLogger(slog.New(slog.NewJSONHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := a.Run(context.Background(), map[string]any{"who": "x"}); err != nil {
		t.Fatal(err)
	}
	chat, run := chatAndRun(t, rec)
	sc := chat.SpanContext()
	if want := "00-" + sc.TraceID().String() + "-" + sc.SpanID().String() + "-01"; m.tp != want {
		t.Errorf("the model call carried traceparent %q, want its chat span's %q", m.tp, want)
	}
	for _, line := range strings.Split(strings.TrimSpace(logs.String()), "\n") {
		var r map[string]any
		json.Unmarshal([]byte(line), &r)
		if r["trace_id"] != run.SpanContext().TraceID().String() || r["span_id"] != run.SpanContext().SpanID().String() {
			t.Errorf("a log record without the run's trace and span ids: %s", line)
		}
	}
}

// TestSpanErrors: a failed model call and a failed run say why.
func TestSpanErrors(t *testing.T) {
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	defer tp.Shutdown(context.Background())
	fail := &recorder{replies: []reply{{err: &llm.APIError{Kind: llm.KindAuth, Provider: "test", Message: "bad key " + otelCanary}}}}
	a, err := New(mustSpec(t, `{`+base+`}`), WithProvider(fail, "anthropic"), WithTracerProvider(tp))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := a.Run(context.Background(), map[string]any{"who": "x"}); !errors.Is(err, ErrModel) {
		t.Fatalf("err = %v", err)
	}
	chat, run := chatAndRun(t, rec)
	if chat.Status().Code != codes.Error || attrs(chat)["error.type"].AsString() != llm.KindAuth.String() ||
		attrs(chat)["gen_ai.provider.name"].AsString() != "anthropic" {
		t.Errorf("chat span status %v, attributes %v", chat.Status(), attrs(chat))
	}
	if run.Status().Code != codes.Error || attrs(run)["error.type"].AsString() != CodeLLMError {
		t.Errorf("run span status %v, error.type %q", run.Status(), attrs(run)["error.type"].AsString())
	}
	for _, s := range rec.Ended() {
		if strings.Contains(s.Status().Description, "CANARYotel") {
			t.Errorf("span %s status carries the secret: %s", s.Name(), s.Status().Description)
		}
	}
}

// streamed is a model that streams its answer: two pieces of text, then
// the call's usage (with cached prompt tokens), model and finish reason.
type streamed struct{}

func (streamed) Generate(ctx context.Context, req *llm.Request) (*llm.Response, error) {
	return llm.Collect(streamed{}.Stream(ctx, req), nil)
}

func (streamed) Stream(context.Context, *llm.Request) iter.Seq2[llm.Chunk, error] {
	return func(yield func(llm.Chunk, error) bool) {
		for _, ch := range []llm.Chunk{{Text: "Hel"}, {Text: "lo."},
			{Usage: &llm.Usage{PromptTokens: 7, CompletionTokens: 3, CachedPromptTokens: 4}, Model: "m-2026-01", FinishReason: "stop"}} {
			if !yield(ch, nil) {
				return
			}
		}
	}
}

// TestStreamedSpan: a streamed call's span and metrics carry its time to
// the first chunk, the model that answered, the finish reason and the
// cached prompt tokens.
func TestStreamedSpan(t *testing.T) {
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	defer tp.Shutdown(context.Background())
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	defer mp.Shutdown(context.Background())
	a, err := New(mustSpec(t, `{`+base+`}`), WithProvider(streamed{}, "openai"), WithTracerProvider(tp), WithMeterProvider(mp))
	if err != nil {
		t.Fatal(err)
	}
	chunks := 0
	if _, err := a.Run(context.Background(), map[string]any{"who": "x"}, WithEvents(func(e event.Event) {
		if e.Type == event.ContentChunk {
			chunks++
		}
	})); err != nil || chunks == 0 {
		t.Fatalf("%v, %d chunks: the run did not stream", err, chunks)
	}
	chat, _ := chatAndRun(t, rec)
	at := attrs(chat)
	if at["gen_ai.response.time_to_first_chunk"].AsFloat64() <= 0 || at["gen_ai.response.model"].AsString() != "m-2026-01" ||
		fmt.Sprint(at["gen_ai.response.finish_reasons"].AsStringSlice()) != "[stop]" || at["gen_ai.usage.cache_read.input_tokens"].AsInt64() != 4 {
		t.Errorf("the streamed call's span: %v", at)
	}
	var rm metricdata.ResourceMetrics
	if err := reader.Collect(context.Background(), &rm); err != nil {
		t.Fatal(err)
	}
	first := uint64(0)
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			if h, ok := m.Data.(metricdata.Histogram[float64]); ok && m.Name == "gen_ai.client.operation.time_to_first_chunk" {
				for _, p := range h.DataPoints {
					first += p.Count
				}
			}
		}
	}
	if first != 1 {
		t.Errorf("time to first chunk recorded %d times, want once", first)
	}
}

// TestTraceStateThroughSpans: a traced run joins the caller's trace
// context, and its model call carries the caller's tracestate beside
// its chat span's traceparent.
func TestTraceStateThroughSpans(t *testing.T) {
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	defer tp.Shutdown(context.Background())
	m := &tpModel{}
	a, err := New(mustSpec(t, `{`+base+`}`), WithProvider(m, "test"), WithTracerProvider(tp))
	if err != nil {
		t.Fatal(err)
	}
	const caller = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	if _, err := a.Run(context.Background(), map[string]any{"who": "x"}, WithTraceContext(caller, "vendor=a,other=b")); err != nil {
		t.Fatal(err)
	}
	chat, run := chatAndRun(t, rec)
	if got := run.Parent().SpanID().String(); got != "00f067aa0ba902b7" || run.SpanContext().TraceID().String() != "4bf92f3577b34da6a3ce929d0e0e4736" {
		t.Errorf("the run's span is not the caller's child: parent %s, trace %s", got, run.SpanContext().TraceID())
	}
	if !strings.Contains(m.tp, chat.SpanContext().SpanID().String()) || m.ts != "vendor=a,other=b" {
		t.Errorf("the model call carried %q, %q; want its chat span and the caller's tracestate", m.tp, m.ts)
	}
}
