package agent

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"

	"github.com/agentry/agentry/event"
	"github.com/agentry/agentry/internal/testdb"
	"github.com/agentry/agentry/llm"
	"github.com/agentry/agentry/store"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
)

// traceSeer records the trace context its calls were made in.
type traceSeer struct{ seen, states []string }

func (s *traceSeer) Generate(ctx context.Context, _ *llm.Request) (*llm.Response, error) {
	tp, ts := llm.TraceContext(ctx)
	s.seen, s.states = append(s.seen, tp), append(s.states, ts)
	return &llm.Response{Content: "ok"}, nil
}

// TestTraceIDs: a caller's trace id is on every event and in the Result,
// and the model call carries it as a traceparent, with the caller's
// tracestate; a traceparent gives its trace id; a malformed one, a
// malformed tracestate or one without a traceparent is refused.
func TestTraceIDs(t *testing.T) {
	const id = "4bf92f3577b34da6a3ce929d0e0e4736"
	for _, tt := range []struct {
		name  string
		opt   RunOption
		state string
	}{
		{"trace id", WithTraceContext(id, ""), ""},
		{"traceparent", WithTraceContext("00-"+id+"-00f067aa0ba902b7-01", ""), ""},
		{"trace id and tracestate", WithTraceContext(id, "vendor=a"), "vendor=a"},
		{"traceparent and tracestate", WithTraceContext("00-"+id+"-00f067aa0ba902b7-01", "vendor=a,other=b"), "vendor=a,other=b"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			m := &traceSeer{}
			a := newTestAgent(t, `{"agent_name": "t", "version": "v1", "model_name": "m"}`, m)
			var events []event.Event
			res, err := a.Run(context.Background(), nil, tt.opt, WithEvents(func(e event.Event) { events = append(events, e) }, event.Block()))
			if err != nil {
				t.Fatal(err)
			}
			if res.TraceID != id || len(events) == 0 {
				t.Fatalf("trace id %q, %d events", res.TraceID, len(events))
			}
			for _, e := range events {
				if e.TraceID != id {
					t.Errorf("%s event has trace id %q", e.Type, e.TraceID)
				}
			}
			if len(m.seen) != 1 || !strings.HasPrefix(m.seen[0], "00-"+id+"-") || len(m.seen[0]) != 55 {
				t.Errorf("the model call's traceparent %q", m.seen)
			}
			if m.states[0] != tt.state {
				t.Errorf("the model call's tracestate %q, want %q", m.states[0], tt.state)
			}
		})
	}
	a := newTestAgent(t, `{"agent_name": "t", "version": "v1", "model_name": "m"}`, &traceSeer{})
	for _, bad := range []RunOption{WithTraceContext("xyz", ""), WithTraceContext(strings.Repeat("0", 32), ""), WithTraceContext("00-abc-01", ""),
		WithTraceContext(id, "not a list entry"), WithTraceContext("", "vendor=a")} {
		if _, err := a.NewSession(nil, bad); !errors.Is(err, ErrConfig) {
			t.Errorf("a malformed trace: %v", err)
		}
	}
	// Without a trace, nothing is sent and nothing is set.
	m := &traceSeer{}
	res, _ := newTestAgent(t, `{"agent_name": "t", "version": "v1", "model_name": "m"}`, m).Run(context.Background(), nil)
	if res.TraceID != "" || m.seen[0] != "" {
		t.Errorf("a run without a trace: %q, %q", res.TraceID, m.seen)
	}
}

// TestTracingSampling: a spec's tracing decides, once per run, both
// whether the store records it and whether its spans are exported:
// enabled false neither, a sample rate the same runs for both.
func TestTracingSampling(t *testing.T) {
	for _, tt := range []struct {
		tracing string
		want    int // runs stored of 20
	}{
		{`{"enabled": false}`, 0},
		{`{"sample_rate": 0}`, 0},
		{`{"sample_rate": 1}`, 20},
		{`{"sample_rate": 0.5}`, -1}, // some, not all
	} {
		t.Run(tt.tracing, func(t *testing.T) {
			ctx := context.Background()
			st := openStore(t, testdb.SQLite(t))
			replies := make([]reply, 20)
			for i := range replies {
				replies[i] = answer("ok")
			}
			rec := tracetest.NewSpanRecorder()
			tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
			t.Cleanup(func() { tp.Shutdown(context.Background()) })
			a, err := New(mustSpec(t, `{"agent_name": "t", "version": "v1", "model_name": "m", "tracing": `+tt.tracing+`}`),
				WithProvider(&recorder{replies: replies}, "test"), WithTracerProvider(tp))
			if err != nil {
				t.Fatal(err)
			}
			for i := range 20 {
				// Sampled by trace id: the same ids, the same choice, every
				// time; half the runs name none, and are sampled by their
				// run id, before their span gives them a trace id.
				opts := []RunOption{WithStore(st)}
				if i%2 == 0 {
					opts = append(opts, WithTraceContext(fmt.Sprintf("%032x", i+1), ""))
				}
				if _, err := a.Run(ctx, nil, opts...); err != nil {
					t.Fatal(err)
				}
			}
			runs, _ := st.List(ctx, store.Filter{})
			if tt.want >= 0 && len(runs) != tt.want || tt.want < 0 && (len(runs) == 0 || len(runs) == 20) {
				t.Errorf("%d runs stored", len(runs))
			}
			stored := map[string]bool{}
			for _, r := range runs {
				stored[r.ID] = true
			}
			traced := map[string]bool{}
			for _, sp := range rec.Ended() {
				for _, kv := range sp.Attributes() {
					if kv.Key == "agentry.run_id" {
						traced[kv.Value.AsString()] = true
					}
				}
			}
			if !maps.Equal(stored, traced) {
				t.Errorf("runs stored %v, runs traced %v: one decision should make both", slices.Sorted(maps.Keys(stored)), slices.Sorted(maps.Keys(traced)))
			}
		})
	}
}
