package agent

import (
	"context"
	"iter"
	"slices"
	"testing"

	"github.com/agentry/agentry/event"
	"github.com/agentry/agentry/llm"
	"github.com/agentry/agentry/llm/scripted"
)

// Defect 4: a listener that unsubscribes itself, a viewer stuck in its
// callback and a sink that must see everything, on one run.
func TestListenersNeverStallARun(t *testing.T) {
	replies := []reply{}
	for range 20 {
		replies = append(replies, calls(call("c", "add", `{"a": 1, "b": 2}`)))
	}
	replies = append(replies, answer("done"))
	a := newTestAgent(t, `{"agent_name": "busy", "version": "v1", "model_name": "test", "tools": ["add"], "limits": {"max_turns": 30}}`,
		&recorder{replies: replies})

	svc := NewService()
	defer svc.Stop(context.Background())
	gate := make(chan struct{})
	var viewer []event.Event
	stopViewer := svc.Subscribe(func(e event.Event) { // a live view whose client stopped reading
		<-gate
		viewer = append(viewer, e)
	}, event.Buffer(8))
	defer stopViewer()

	var sink []event.Event
	var self int
	var sess *Session
	sess, err := svc.CreateSession(a, nil, WithEvents(func(e event.Event) { sink = append(sink, e) }, event.Block(), event.Buffer(2)))
	if err != nil {
		t.Fatal(err)
	}
	var unsub func()
	unsub = sess.bus.Subscribe(func(event.Event) {
		self++
		if self == 3 {
			unsub()
		}
	})
	res, err := sess.Run(context.Background()) // returns although the viewer is stuck
	if err != nil || !res.Success {
		t.Fatalf("%v %+v", err, res.Error)
	}
	if self != 3 {
		t.Errorf("the self-unsubscribing listener got %d events", self)
	}
	for i, e := range sink {
		if e.Seq != uint64(i+1) || e.Dropped != 0 {
			t.Fatalf("sink event %d: seq %d dropped %d", i, e.Seq, e.Dropped)
		}
	}
	if n := len(sink); n < 80 || sink[n-1].Type != event.RunEnd {
		t.Errorf("the sink got %d events, the last %v", n, sink[n-1].Type)
	}

	close(gate)
	svc.Events().Flush()
	var missed uint64
	for _, e := range viewer {
		missed += e.Dropped
	}
	if last := viewer[len(viewer)-1]; last.Type != event.RunEnd || missed == 0 || uint64(len(viewer))+missed != last.Seq {
		t.Errorf("the viewer got %d events and missed %d, the last %v (seq %d)", len(viewer), missed, last.Type, last.Seq)
	}
}

// TestEventsOfATurn: turn_end carries the turn's duration and the run's
// tokens so far in typed fields, and event times never go backwards.
func TestEventsOfATurn(t *testing.T) {
	s := benchScriptN(t, 3) // 28 tokens a tool turn, 25 the answer
	a := benchAgent(t, s)
	var events []event.Event
	res, err := a.Run(context.Background(), map[string]any{"task": "add"}, WithSessionProvider(s.Model()),
		WithEvents(func(e event.Event) { events = append(events, e) }))
	if err != nil {
		t.Fatal(err)
	}
	var tokens []int
	var turnMS float64
	for i, e := range events {
		if i > 0 && e.Time.Before(events[i-1].Time) {
			t.Errorf("event %d (%s) at %v is before event %d at %v", i, e.Type, e.Time, i-1, events[i-1].Time)
		}
		if e.Type == event.TurnEnd {
			tokens = append(tokens, e.TotalTokens)
			turnMS += e.DurationMS
			if e.DurationMS <= 0 || e.Data != nil {
				t.Errorf("turn_end %d: duration %v ms, data %v", e.Turn, e.DurationMS, e.Data)
			}
		}
	}
	if want := []int{28, 56, 81}; !slices.Equal(tokens, want) {
		t.Errorf("turn_end tokens %v, want %v", tokens, want)
	}
	if turnMS > res.Metrics.DurationMS {
		t.Errorf("the turns took %v ms in all, longer than the run's %v ms", turnMS, res.Metrics.DurationMS)
	}
}

// countingModel counts how the run called the model.
type countingModel struct {
	*scripted.Model
	generated, streamed int
}

func (m *countingModel) Generate(ctx context.Context, req *llm.Request) (*llm.Response, error) {
	m.generated++
	return m.Model.Generate(ctx, req)
}

func (m *countingModel) Stream(ctx context.Context, req *llm.Request) iter.Seq2[llm.Chunk, error] {
	m.streamed++
	return m.Model.Stream(ctx, req)
}

// TestStreamsOnlyForChunks: a run streams its model calls when, and only
// when, a listener takes content_chunk events.
func TestStreamsOnlyForChunks(t *testing.T) {
	tests := []struct {
		name   string
		opts   []event.Option
		stream bool
	}{
		{"every type", nil, true},
		{"chunks among others", []event.Option{event.Types(event.RunEnd, event.ContentChunk)}, true},
		{"no chunks", []event.Option{event.Types(event.RunStart, event.ToolCallEnd, event.RunEnd)}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := benchScriptN(t, 3)
			a := benchAgent(t, s)
			m := &countingModel{Model: s.Model()}
			var types []event.Type
			_, err := a.Run(context.Background(), map[string]any{"task": "add"}, WithSessionProvider(m),
				WithEvents(func(e event.Event) { types = append(types, e.Type) }, tt.opts...))
			if err != nil {
				t.Fatal(err)
			}
			if got := m.streamed == 3 && m.generated == 0; got != tt.stream {
				t.Errorf("streamed %d and generated %d of 3 calls; streaming wanted: %v", m.streamed, m.generated, tt.stream)
			}
			if tt.stream != slices.Contains(types, event.ContentChunk) {
				t.Errorf("events %v", types)
			}
		})
	}
}
