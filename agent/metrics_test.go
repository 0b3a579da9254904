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
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			switch d := m.Data.(type) {
			case metricdata.Sum[int64]:
				sums[m.Name] = map[string]int64{}
				for _, p := range d.DataPoints {
					key := ""
					for _, kv := range p.Attributes.ToSlice() {
						if kv.Key != "agent" {
							key += string(kv.Key) + "=" + kv.Value.String() + " "
						}
					}
					sums[m.Name][key] += p.Value
				}
			case metricdata.Histogram[float64]:
				for _, p := range d.DataPoints {
					hist[m.Name] += p.Count
				}
			case metricdata.Histogram[int64]:
				for _, p := range d.DataPoints {
					hist[m.Name] += p.Count
				}
			}
		}
	}
	runs := sums["agentry.agent.runs"]
	if runs["outcome=success success=true terminate_reason=completed "] != 2 || runs["outcome=partial success=false terminate_reason=max_turns "] != 1 {
		t.Errorf("runs %v", runs)
	}
	if c := sums["agentry.tool.calls"]; c["status=success tool=add "] != 3 || c["status=error tool=nope "] != 1 {
		t.Errorf("tool calls %v", c)
	}
	if e := sums["agentry.agent.errors"]; e["type=tool_error "] != 1 || e["type=max_turns "] != 1 {
		t.Errorf("errors %v", e)
	}
	if hist["agentry.agent.duration"] != 3 || hist["agentry.agent.iterations"] != 3 || hist["agentry.agent.cost"] != 0 {
		t.Errorf("histograms %v", hist)
	}
	if tk := sums["agentry.agent.tokens"]; tk["type=prompt "] != 50 || tk["type=completion "] != 25 {
		t.Errorf("tokens %v", tk)
	}
}
