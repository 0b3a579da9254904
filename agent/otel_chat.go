package agent

import (
	"context"
	"encoding/json"
	"errors"
	"iter"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/metric"
	semconv "go.opentelemetry.io/otel/semconv/v1.41.0"
	"go.opentelemetry.io/otel/semconv/v1.41.0/genaiconv"
	oteltrace "go.opentelemetry.io/otel/trace"

	"github.com/agentry/agentry/internal/telemetry"
	"github.com/agentry/agentry/llm"
	"github.com/agentry/agentry/policy"
)

// genaiMetrics are the GenAI conventions' client metrics, per model call.
type genaiMetrics struct {
	tokens     genaiconv.ClientTokenUsage
	duration   genaiconv.ClientOperationDuration
	firstChunk genaiconv.ClientOperationTimeToFirstChunk
}

func newGenAIMetrics(m metric.Meter) genaiMetrics {
	var g genaiMetrics
	// These fail only for invalid names, which the conventions' are not;
	// a failed instrument is a no-op.
	g.tokens, _ = genaiconv.NewClientTokenUsage(m)
	g.duration, _ = genaiconv.NewClientOperationDuration(m)
	g.firstChunk, _ = genaiconv.NewClientOperationTimeToFirstChunk(m)
	return g
}

func (g *genaiMetrics) on(ctx context.Context) bool {
	return g.duration.Inst().Enabled(ctx) || g.tokens.Inst().Enabled(ctx) || g.firstChunk.Inst().Enabled(ctx)
}

// observed is the outermost layer of each model the agent calls: a chat
// span per call of a traced run and the GenAI client metrics, or nothing
// at all when nobody traces or collects.
type observed struct {
	next     llm.Provider
	a        *Agent
	provider string // gen_ai.provider.name
	model    string
}

type observedStream struct {
	observed
	s llm.Streamer
}

// observe wraps p, a model of provider and model.
func (a *Agent) observe(p llm.Provider, provider, model string) llm.Provider {
	o := observed{next: p, a: a, provider: providerNameOf(provider), model: model}
	if s, ok := p.(llm.Streamer); ok {
		return &observedStream{observed: o, s: s}
	}
	return &o
}

// modelCall is one observed model call.
type modelCall struct {
	o       *observed
	ctx     context.Context
	span    oteltrace.Span // nil when the run is not traced
	content bool           // telemetry.CaptureContentEnv
	start   time.Time
	first   time.Duration // to the first chunk of a stream
}

// begin opens a call, or says there is nothing to observe.
func (o *observed) begin(ctx context.Context, req *llm.Request) (*modelCall, bool) {
	r, _ := policy.HostFrom(ctx).(*run)
	traced := r != nil && r.otel != nil
	if !traced && !o.a.metrics.genai.on(ctx) {
		return nil, false
	}
	c := &modelCall{o: o, ctx: ctx, start: time.Now()}
	if traced {
		t := r.otel
		c.content = t.content
		attrs := make([]attribute.KeyValue, 0, 8)
		attrs = append(attrs, semconv.GenAIOperationNameKey.String(string(genaiconv.OperationNameChat)),
			semconv.GenAIProviderNameKey.String(o.provider), semconv.GenAIRequestModel(o.model))
		attrs = append(attrs, t.agent[:]...)
		if t.content {
			attrs = append(attrs, semconv.GenAIInputMessagesKey.String(messagesJSON(req.Messages, o.a.redact)))
		}
		c.ctx, c.span = t.tracer.Start(ctx, string(genaiconv.OperationNameChat)+" "+o.model,
			oteltrace.WithSpanKind(oteltrace.SpanKindClient), oteltrace.WithAttributes(attrs...))
		// The provider's HTTP request carries this span as its parent.
		sc := c.span.SpanContext()
		c.ctx = llm.WithTraceContext(c.ctx, telemetry.TraceParent(sc), sc.TraceState().String())
	}
	return c, true
}

// end closes the call with its response or error.
func (c *modelCall) end(resp *llm.Response, err error) {
	o, g := c.o, &c.o.a.metrics.genai
	model := o.model
	if resp != nil && resp.Model != "" {
		model = resp.Model
	}
	op, prov := genaiconv.OperationNameChat, genaiconv.ProviderNameAttr(o.provider)
	reqModel, respModel := g.duration.AttrRequestModel(o.model), g.duration.AttrResponseModel(model)
	if err != nil {
		g.duration.Record(c.ctx, time.Since(c.start).Seconds(), op, prov, reqModel, respModel, g.duration.AttrErrorType(genaiconv.ErrorTypeAttr(errorType(err))))
	} else {
		g.duration.Record(c.ctx, time.Since(c.start).Seconds(), op, prov, reqModel, respModel)
	}
	if resp != nil {
		g.tokens.Record(c.ctx, int64(resp.Usage.PromptTokens), op, prov, genaiconv.TokenTypeInput, reqModel, respModel)
		g.tokens.Record(c.ctx, int64(resp.Usage.CompletionTokens), op, prov, genaiconv.TokenTypeOutput, reqModel, respModel)
	}
	if c.first > 0 {
		g.firstChunk.Record(c.ctx, c.first.Seconds(), op, prov, reqModel, respModel)
	}
	if c.span == nil {
		return
	}
	s := c.span
	s.SetAttributes(semconv.GenAIResponseModel(model))
	if c.first > 0 {
		s.SetAttributes(semconv.GenAIResponseTimeToFirstChunk(c.first.Seconds()))
	}
	if resp != nil {
		u := resp.Usage
		s.SetAttributes(semconv.GenAIUsageInputTokens(u.PromptTokens), semconv.GenAIUsageOutputTokens(u.CompletionTokens))
		if u.CachedPromptTokens > 0 {
			s.SetAttributes(semconv.GenAIUsageCacheReadInputTokens(u.CachedPromptTokens))
		}
		if resp.FinishReason != "" {
			s.SetAttributes(semconv.GenAIResponseFinishReasons(resp.FinishReason))
		}
		if c.content && err == nil {
			m := resp.Message()
			s.SetAttributes(semconv.GenAIOutputMessagesKey.String(messagesJSON([]llm.Message{m}, o.a.redact)))
		}
	}
	if err != nil {
		s.SetAttributes(semconv.ErrorTypeKey.String(errorType(err)))
		s.SetStatus(codes.Error, o.a.redact.String(err.Error()))
	}
	s.End()
}

func (o *observed) Generate(ctx context.Context, req *llm.Request) (*llm.Response, error) {
	c, ok := o.begin(ctx, req)
	if !ok {
		return o.next.Generate(ctx, req)
	}
	resp, err := o.next.Generate(c.ctx, req)
	c.end(resp, err)
	return resp, err
}

func (o *observedStream) Stream(ctx context.Context, req *llm.Request) iter.Seq2[llm.Chunk, error] {
	c, ok := o.begin(ctx, req)
	if !ok {
		return o.s.Stream(ctx, req)
	}
	return func(yield func(llm.Chunk, error) bool) {
		var err error
		resp := &llm.Response{} // what the chunks say of the call, for the span
		defer func() { c.end(resp, err) }()
		for ch, e := range o.s.Stream(c.ctx, req) {
			if e != nil {
				err = e
			} else {
				if c.first == 0 {
					c.first = max(time.Since(c.start), 1)
				}
				chunkInto(resp, ch)
			}
			if !yield(ch, e) {
				return
			}
		}
	}
}

// chunkInto adds what a chunk says of the whole call to resp.
func chunkInto(resp *llm.Response, ch llm.Chunk) {
	resp.Content += ch.Text
	if ch.Usage != nil {
		resp.Usage = *ch.Usage
	}
	if ch.Model != "" {
		resp.Model = ch.Model
	}
	if ch.FinishReason != "" {
		resp.FinishReason = ch.FinishReason
	}
	if d := ch.ToolCall; d != nil && d.Name != "" {
		resp.ToolCalls = append(resp.ToolCalls, llm.ToolCall{ID: d.ID, Name: d.Name})
	}
}

// errorType is error.type for a failed call: the provider error's kind,
// or the conventions' fallback.
func errorType(err error) string {
	var e *llm.APIError
	if errors.As(err, &e) {
		return e.Kind.String()
	}
	return string(genaiconv.ErrorTypeOther)
}

// part and message are the GenAI conventions' message shape, for
// gen_ai.input.messages and gen_ai.output.messages.
type part struct {
	Type      string          `json:"type"`
	Content   string          `json:"content,omitempty"`
	ID        string          `json:"id,omitempty"`
	Name      string          `json:"name,omitempty"`
	Arguments json.RawMessage `json:"arguments,omitempty"`
	Response  string          `json:"response,omitempty"`
}

type message struct {
	Role  string `json:"role"`
	Parts []part `json:"parts"`
}

// messagesJSON is msgs in the conventions' shape, redacted.
func messagesJSON(msgs []llm.Message, red *policy.Redactor) string {
	out := make([]message, 0, len(msgs))
	for _, m := range msgs {
		var parts []part
		switch {
		case m.Role == llm.RoleTool:
			parts = append(parts, part{Type: "tool_call_response", ID: m.ToolCallID, Response: m.Content})
		case m.Content != "":
			parts = append(parts, part{Type: "text", Content: m.Content})
		}
		for _, tc := range m.ToolCalls {
			args := json.RawMessage(tc.Arguments)
			if !json.Valid(args) {
				args = nil
			}
			parts = append(parts, part{Type: "tool_call", ID: tc.ID, Name: tc.Name, Arguments: args})
		}
		out = append(out, message{Role: string(m.Role), Parts: parts})
	}
	b, _ := json.Marshal(out)
	return string(red.Bytes(b))
}
