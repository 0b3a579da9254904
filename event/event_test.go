package event

import (
	"bytes"
	"context"
	"encoding/json"
	"runtime"
	"strings"
	"sync"
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestPublishOrderAcrossGoroutines(t *testing.T) {
	var b Bus
	if b.Active() {
		t.Fatal("an empty bus is active")
	}
	var got []uint64
	unsub := b.Subscribe(func(e Event) { got = append(got, e.Seq) })
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 100 {
				b.Publish(Event{Type: ToolCallEnd})
			}
		}()
	}
	wg.Wait()
	if len(got) != 800 {
		t.Fatalf("got %d events", len(got))
	}
	for i, s := range got {
		if s != uint64(i+1) {
			t.Fatalf("event %d has seq %d: delivery is not in one order", i, s)
		}
	}
	unsub()
	unsub()
	if b.Active() {
		t.Error("bus still active after unsubscribe")
	}
	b.Publish(Event{})
	if len(got) != 800 {
		t.Error("delivered after unsubscribe")
	}
}

func TestParentForwarding(t *testing.T) {
	parent := NewBus(nil)
	child := NewBus(parent)
	if child.Active() {
		t.Fatal("active without listeners")
	}
	var seen []Type
	stop := parent.Subscribe(func(e Event) { seen = append(seen, e.Type) })
	defer stop()
	if !child.Active() {
		t.Fatal("child not active while the parent listens")
	}
	child.Publish(Event{Type: RunStart})
	child.Publish(Event{Type: RunEnd})
	if len(seen) != 2 || seen[0] != RunStart || seen[1] != RunEnd {
		t.Errorf("parent saw %v", seen)
	}
}

func TestChannelAndIterator(t *testing.T) {
	var b Bus
	ch, stop := b.Channel(4)
	b.Publish(Event{Type: TurnStart})
	if e := <-ch; e.Type != TurnStart {
		t.Errorf("channel got %v", e.Type)
	}
	stop()
	if _, ok := <-ch; ok {
		t.Error("channel not closed by stop")
	}

	ctx, cancel := context.WithCancel(context.Background())
	ready := make(chan struct{})
	done := make(chan []Type)
	go func() {
		var types []Type
		for e := range b.All(ctx) {
			types = append(types, e.Type)
			if e.Type == RunEnd {
				break
			}
		}
		done <- types
	}()
	go func() {
		for !b.Active() {
			runtime.Gosched()
		}
		close(ready)
	}()
	<-ready
	b.Publish(Event{Type: RunStart})
	b.Publish(Event{Type: RunEnd})
	types := <-done
	cancel()
	if len(types) != 2 || types[1] != RunEnd {
		t.Errorf("iterator saw %v", types)
	}
}

func TestJSONLines(t *testing.T) {
	var buf bytes.Buffer
	fn, errs := JSONLines(&buf)
	fn(Event{Type: ToolCallStart, RunID: "r", Tool: &ToolCall{ID: "c", Name: "add", Arguments: json.RawMessage(`{"a":1}`)}})
	fn(Event{Type: RunEnd, RunID: "r"})
	if errs() != nil {
		t.Fatal(errs())
	}
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	if len(lines) != 2 {
		t.Fatalf("%d lines", len(lines))
	}
	var e map[string]any
	if err := json.Unmarshal([]byte(lines[0]), &e); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"type", "run_id", "agent_name", "turn", "time", "tool"} {
		if _, ok := e[k]; !ok {
			t.Errorf("line lacks %q: %s", k, lines[0])
		}
	}
}

func TestPanickingSubscriberIsDropped(t *testing.T) {
	var b Bus
	got := 0
	b.Subscribe(func(Event) { panic("broken listener") })
	stop := b.Subscribe(func(Event) { got++ })
	b.Publish(Event{Type: RunStart})
	b.Publish(Event{Type: RunEnd})
	if got != 2 {
		t.Errorf("the healthy subscriber got %d events", got)
	}
	stop()
	if b.Active() {
		t.Error("still active")
	}
}
