package agent

import (
	"context"
	"testing"

	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
)

func TestMetrics(t *testing.T) {
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	defer mp.Shutdown(context.Background())
	for _, replies := range [][]reply{
		{calls(call("a", "add", `{"a":1,"b":2}`), call("b", "nope", `{}`)), answer("3")},
		{answer("first")},
		forever(3),
	} {
		s := mustSpec(t, `{`+base+`, "tools": ["add"], "limits": {"max_turns": 2}}`)
		a, err := New(s, WithProvider(&recorder{replies: replies}, "test"), WithTools(testTools(t)), WithMeterProvider(mp))
		if err != nil {
			t.Fatal(err)
		}
		a.Run(context.Background(), map[string]any{"who": "x"})
	}
	var rm metricdata.ResourceMetrics
	if err := reader.Collect(context.Background(), &rm); err != nil {
		t.Fatal(err)
	}
	sums := map[string]map[string]int64{}
	hist := map[string]uint64{}
	byAttr := map[string]int64{} // histogram counts or sums by metric and a GenAI attribute
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			switch d := m.Data.(type) {
			case metricdata.Sum[int64]:
				sums[m.Name] = map[string]int64{}
				for _, p := range d.DataPoints {
					key := ""
					for _, kv := range p.Attributes.ToSlice() {
						if kv.Key != "gen_ai.agent.name" {
							key += string(kv.Key) + "=" + kv.Value.String() + " "
						}
					}
					sums[m.Name][key] += p.Value
				}
			case metricdata.Histogram[float64]:
				for _, p := range d.DataPoints {
					hist[m.Name] += p.Count
					op, _ := p.Attributes.Value("gen_ai.operation.name")
					byAttr[m.Name+" "+op.AsString()] += int64(p.Count)
				}
			case metricdata.Histogram[int64]:
				for _, p := range d.DataPoints {
					hist[m.Name] += p.Count
					typ, _ := p.Attributes.Value("gen_ai.token.type")
					byAttr[m.Name+" "+typ.AsString()] += p.Sum
				}
			}
		}
	}
	runs := sums["agentry.agent.runs"]
	if runs["agentry.outcome=success agentry.success=true agentry.terminate_reason=completed "] != 2 || runs["agentry.outcome=partial agentry.success=false agentry.terminate_reason=max_turns "] != 1 {
		t.Errorf("runs %v", runs)
	}
	if c := sums["agentry.tool.calls"]; c["agentry.tool.status=success gen_ai.tool.name=add "] != 3 || c["agentry.tool.status=error gen_ai.tool.name=nope "] != 1 {
		t.Errorf("tool calls %v", c)
	}
	if e := sums["agentry.agent.errors"]; e["error.type=tool_error "] != 1 || e["error.type=max_turns "] != 1 {
		t.Errorf("errors %v", e)
	}
	if hist["agentry.agent.iterations"] != 3 || hist["agentry.agent.cost"] != 0 {
		t.Errorf("histograms %v", hist)
	}
	// The GenAI conventions' metrics: five model calls and three runs, the
	// tokens of each call by type.
	if byAttr["gen_ai.client.operation.duration chat"] != 5 || byAttr["gen_ai.client.operation.duration invoke_agent"] != 3 {
		t.Errorf("operation durations %v", byAttr)
	}
	if byAttr["gen_ai.client.token.usage input"] != 50 || byAttr["gen_ai.client.token.usage output"] != 25 {
		t.Errorf("token usage %v", byAttr)
	}
	for _, gone := range []string{"agentry.agent.duration", "agentry.agent.tokens"} {
		if _, ok := hist[gone]; ok {
			t.Errorf("%s is measured: the GenAI conventions name it", gone)
		}
	}
}
