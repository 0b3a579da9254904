package agent

import (
	"context"

	"github.com/agentry/agentry/internal/telemetry"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	semconv "go.opentelemetry.io/otel/semconv/v1.41.0"
	"go.opentelemetry.io/otel/semconv/v1.41.0/genaiconv"
)

// The metrics of the Noema spec, through the OpenTelemetry metrics API:
// attach any exporter to the MeterProvider (otel.SetMeterProvider, or
// WithMeterProvider) to collect them.
//
// The GenAI conventions' names where they have one:
//
//	gen_ai.client.operation.duration        histogram seconds: each model call (chat) and each run (invoke_agent)
//	gen_ai.client.token.usage               histogram tokens per model call, by gen_ai.token.type
//	gen_ai.client.operation.time_to_first_chunk  histogram seconds, streamed model calls
//
// and agentry's own where they have none:
//
//	agentry.agent.runs        counter   runs, by agent, agentry.outcome, agentry.terminate_reason, agentry.success (success rate)
//	agentry.agent.iterations  histogram loop turns per run, by agent
//	agentry.agent.cost        histogram estimated cost per run in USD, by agent
//	agentry.tool.calls        counter   tool calls, by agent, gen_ai.tool.name and agentry.tool.status (tool usage)
//	agentry.agent.errors      counter   failed runs and tool calls, by agent and error.type
//
// The agent is gen_ai.agent.name.
type metrics struct {
	runs       metric.Int64Counter
	iterations metric.Int64Histogram
	cost       metric.Float64Histogram
	toolCalls  metric.Int64Counter
	errors     metric.Int64Counter
	genai      genaiMetrics
}

// WithMeterProvider sets where the agent's metrics go (default: the
// global otel.GetMeterProvider()).
func WithMeterProvider(mp metric.MeterProvider) Option {
	return func(o *options) { o.meters = mp }
}

func newMetrics(mp metric.MeterProvider) *metrics {
	if mp == nil {
		mp = otel.GetMeterProvider()
	}
	m := mp.Meter(telemetry.Name)
	var x metrics
	// Instrument creation fails only for invalid names, which these are not;
	// a failed instrument is a no-op.
	x.runs, _ = m.Int64Counter("agentry.agent.runs", metric.WithDescription("Agent runs"), metric.WithUnit("{run}"))
	x.iterations, _ = m.Int64Histogram("agentry.agent.iterations", metric.WithDescription("Loop turns per run"), metric.WithUnit("{turn}"))
	x.cost, _ = m.Float64Histogram("agentry.agent.cost", metric.WithDescription("Estimated cost per run"), metric.WithUnit("USD"))
	x.genai = newGenAIMetrics(m)
	x.toolCalls, _ = m.Int64Counter("agentry.tool.calls", metric.WithDescription("Tool calls"), metric.WithUnit("{call}"))
	x.errors, _ = m.Int64Counter("agentry.agent.errors", metric.WithDescription("Errors by type"), metric.WithUnit("{error}"))
	return &x
}

// record adds a finished run to the metrics.
func (m *metrics) record(res *Result) {
	ctx := context.Background()
	if !m.runs.Enabled(ctx) {
		return // nobody collects: build no attributes
	}
	agent := semconv.GenAIAgentName(res.AgentName)
	m.runs.Add(ctx, 1, metric.WithAttributes(agent, attribute.String("agentry.outcome", string(res.Outcome)),
		attribute.String("agentry.terminate_reason", string(res.TerminateReason)), attribute.Bool("agentry.success", res.Success)))
	one := metric.WithAttributes(agent)
	m.genai.duration.Record(ctx, res.Metrics.DurationMS/1000, genaiconv.OperationNameInvokeAgent, genaiconv.ProviderNameAttr(providerNameOf(res.Provider)), agent)
	m.iterations.Record(ctx, int64(res.Iterations), one)
	if res.EstimatedCost != nil {
		m.cost.Record(ctx, *res.EstimatedCost, one)
	}
	for _, s := range res.Steps {
		if s.Action == nil {
			if s.ParseError != "" {
				m.errors.Add(ctx, 1, metric.WithAttributes(agent, semconv.ErrorTypeKey.String(CodeParseError)))
			}
			continue
		}
		status := "success"
		if s.Action.Error != "" {
			status = "error"
			m.errors.Add(ctx, 1, metric.WithAttributes(agent, semconv.ErrorTypeKey.String(CodeToolError)))
		}
		m.toolCalls.Add(ctx, 1, metric.WithAttributes(agent, semconv.GenAIToolName(s.Action.Tool), attribute.String("agentry.tool.status", status)))
	}
	if res.Error != nil {
		m.errors.Add(ctx, 1, metric.WithAttributes(agent, semconv.ErrorTypeKey.String(res.Error.Code)))
	}
}
