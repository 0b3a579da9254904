package event

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestPublishOrderAcrossGoroutines(t *testing.T) {
	for _, tt := range []struct {
		name string
		opts []Option
	}{{"drop", nil}, {"block", []Option{Block(), Buffer(3)}}} {
		t.Run(tt.name, func(t *testing.T) {
			var b Bus
			if b.Active() {
				t.Fatal("an empty bus is active")
			}
			var got []uint64
			unsub := b.Subscribe(func(e Event) { got = append(got, e.Seq) }, tt.opts...)
			var wg sync.WaitGroup
			for range 8 {
				wg.Go(func() {
					for range 100 {
						b.Publish(Event{Type: ToolCallEnd})
					}
				})
			}
			wg.Wait()
			b.Flush()
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
			b.Flush()
			if len(got) != 800 {
				t.Error("delivered after unsubscribe")
			}
		})
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
	child.Flush() // its own subscribers only
	parent.Flush()
	if len(seen) != 2 || seen[0] != RunStart || seen[1] != RunEnd {
		t.Errorf("parent saw %v", seen)
	}
}

// TestSelfUnsubscribe: a subscriber may unsubscribe itself from its
// callback, with either policy, while the publisher keeps publishing.
func TestSelfUnsubscribe(t *testing.T) {
	for _, tt := range []struct {
		name string
		opts []Option
	}{{"drop", nil}, {"block", []Option{Block(), Buffer(1)}}} {
		t.Run(tt.name, func(t *testing.T) {
			var b Bus
			var got atomic.Int32
			var unsub func()
			ready := make(chan struct{})
			unsub = b.Subscribe(func(Event) {
				<-ready
				got.Add(1)
				unsub()
			}, tt.opts...)
			close(ready)
			for range 10 {
				b.Publish(Event{Type: TurnStart})
			}
			b.Flush()
			if got.Load() != 1 || b.Active() {
				t.Errorf("got %d events, active %v", got.Load(), b.Active())
			}
		})
	}
}

// TestSlowSubscriberDoesNotStall: a subscriber stuck in its callback
// neither stalls the publisher nor the other subscribers; what it missed
// is counted on the next event it gets.
func TestSlowSubscriberDoesNotStall(t *testing.T) {
	for _, buffer := range []int{1, 4} { // with 1, the count of what was lost rides on the new event
		t.Run(fmt.Sprint("buffer ", buffer), func(t *testing.T) {
			var b Bus
			gate := make(chan struct{})
			var slow []Event
			b.Subscribe(func(e Event) {
				<-gate
				slow = append(slow, e)
			}, Buffer(buffer))
			fast, marked := 0, 0
			b.Subscribe(func(e Event) { // after the slow one: it must not see the slow one's marks
				fast++
				if e.Dropped != 0 {
					marked++
				}
			})
			for range 100 { // returns although the slow subscriber holds event 1
				b.Publish(Event{Type: ContentChunk})
			}
			close(gate)
			b.Publish(Event{Type: RunEnd})
			b.Flush()
			if fast != 101 || marked != 0 {
				t.Errorf("the fast subscriber got %d events, %d marked as after a gap", fast, marked)
			}
			var seen, dropped uint64
			for i, e := range slow {
				seen++
				dropped += e.Dropped
				if i > 0 && e.Seq != slow[i-1].Seq+1+e.Dropped {
					t.Errorf("event seq %d after %d with dropped %d", e.Seq, slow[i-1].Seq, e.Dropped)
				}
			}
			if seen+dropped != 101 || dropped == 0 || slow[len(slow)-1].Type != RunEnd {
				t.Errorf("the slow subscriber saw %d and missed %d of 101, last %v", seen, dropped, slow[len(slow)-1].Type)
			}
		})
	}
}

// TestBlockingSubscriberHoldsThePublisher: with Block nothing is lost, and
// the publisher is never more than a buffer ahead of the subscriber.
func TestBlockingSubscriberHoldsThePublisher(t *testing.T) {
	var b Bus
	var published atomic.Uint64
	var got []Event
	var ahead uint64
	b.Subscribe(func(e Event) {
		if p := published.Load(); p > e.Seq-1+2*2 { // a batch in hand and a full buffer
			ahead = max(ahead, p-e.Seq)
		}
		got = append(got, e)
		runtime.Gosched()
	}, Block(), Buffer(2))
	for range 200 {
		b.Publish(Event{Type: ContentChunk})
		published.Add(1)
	}
	b.Flush()
	if len(got) != 200 || ahead != 0 {
		t.Errorf("got %d events; the publisher ran %d events ahead", len(got), ahead)
	}
	for _, e := range got {
		if e.Dropped != 0 {
			t.Fatalf("a blocking subscriber was marked as dropping: %+v", e)
		}
	}
}

// TestUnsubscribeReleasesABlockedPublisher: unsubscribing a blocking
// subscriber from another goroutine lets a publisher waiting on it go on.
func TestUnsubscribeReleasesABlockedPublisher(t *testing.T) {
	var b Bus
	gate := make(chan struct{})
	entered := make(chan struct{})
	var once sync.Once
	unsub := b.Subscribe(func(Event) {
		once.Do(func() { close(entered) })
		<-gate
	}, Block(), Buffer(1))
	defer close(gate) // whatever happens, the subscriber ends
	done := make(chan struct{})
	go func() {
		defer close(done)
		for range 5 {
			b.Publish(Event{Type: ContentChunk})
		}
	}()
	waitFor(t, entered, "the subscriber to receive the first event")
	unsubscribed := make(chan struct{})
	go func() { unsub(); close(unsubscribed) }()
	// The publisher is (or will be) waiting for space: it must go on.
	waitFor(t, unsubscribed, "Unsubscribe to return while the subscriber is blocked")
	waitFor(t, done, "the blocked publisher to be released by Unsubscribe")
}

// waitFor fails the test, instead of hanging it, when ch is not closed
// within a bound far beyond any scheduling delay.
func waitFor(t *testing.T, ch <-chan struct{}, what string) {
	t.Helper()
	select {
	case <-ch:
	case <-time.After(10 * time.Second):
		t.Fatalf("waited 10s for %s", what)
	}
}

func TestChannelAndIterator(t *testing.T) {
	var b Bus
	ch, stop := b.Channel(4)
	b.Publish(Event{Type: TurnStart})
	if e := <-ch; e.Type != TurnStart {
		t.Errorf("channel got %v", e.Type)
	}
	b.Publish(Event{Type: TurnEnd}) // never read: stop must not hang on it
	stop()
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
	b.Flush()
	if got != 2 {
		t.Errorf("the healthy subscriber got %d events", got)
	}
	stop()
	if b.Active() {
		t.Error("still active")
	}
}

// An event is delivered without a Flush, Latency after its publication
// (the wait below is generous: the test asserts delivery, not a time).
func TestDeliveryWithoutFlush(t *testing.T) {
	var b Bus
	got := make(chan Event, 10)
	stop := b.Subscribe(func(e Event) { got <- e })
	defer stop()
	for range 5 {
		b.Publish(Event{Type: TurnStart})
	}
	for i := range 5 {
		select {
		case e := <-got:
			if e.Seq != uint64(i+1) {
				t.Fatalf("event %d has seq %d", i, e.Seq)
			}
		case <-time.After(10 * time.Second):
			t.Fatal("no delivery without Flush")
		}
	}
}

func TestTypes(t *testing.T) {
	var parent Bus
	child := NewBus(&parent)
	if child.Wants(RunEnd) {
		t.Fatal("a bus nobody listens to wants events")
	}
	var ends []Event
	stop := child.Subscribe(func(e Event) { ends = append(ends, e) }, Types(RunEnd, TurnEnd))
	if !child.Wants(RunEnd) || child.Wants(ContentChunk) {
		t.Errorf("wants run_end %v, content_chunk %v", child.Wants(RunEnd), child.Wants(ContentChunk))
	}
	all := 0
	stopAll := parent.Subscribe(func(Event) { all++ })
	if !child.Wants(ContentChunk) {
		t.Error("a subscriber of every type on the parent does not make the child want content_chunk")
	}
	for _, typ := range []Type{RunStart, ContentChunk, TurnEnd, ContentChunk, RunEnd} {
		child.Publish(Event{Type: typ})
	}
	child.Flush()
	parent.Flush()
	if len(ends) != 2 || ends[0].Type != TurnEnd || ends[0].Seq != 3 || ends[1].Seq != 5 {
		t.Errorf("the subscriber of two types got %+v", ends)
	}
	if all != 5 {
		t.Errorf("the parent's subscriber got %d of 5", all)
	}
	stopAll()
	stop()
	if child.Wants(RunEnd) {
		t.Error("wants after everyone left")
	}
	var none Bus
	n := 0
	defer none.Subscribe(func(Event) { n++ }, Types())()
	none.Publish(Event{Type: Retry})
	none.Flush()
	if n != 1 {
		t.Errorf("Types() took %d of 1 events, want every type", n)
	}
}

func TestExcept(t *testing.T) {
	var b Bus
	var got []Type
	stop := b.Subscribe(func(e Event) { got = append(got, e.Type) }, Except(ContentChunk))
	if b.Wants(ContentChunk) || !b.Wants(RunEnd) {
		t.Errorf("wants content_chunk %v, run_end %v; want false, true", b.Wants(ContentChunk), b.Wants(RunEnd))
	}
	for _, typ := range []Type{RunStart, ContentChunk, ContentChunk, ToolCallEnd, RunEnd} {
		b.Publish(Event{Type: typ})
	}
	b.Flush()
	stop()
	if want := []Type{RunStart, ToolCallEnd, RunEnd}; !slices.Equal(got, want) {
		t.Errorf("got %v, want %v", got, want)
	}
}

func TestInline(t *testing.T) {
	var b Bus
	var got []uint64
	stop := b.Subscribe(func(e Event) { got = append(got, e.Seq) }, Inline())
	for range 3 {
		b.Publish(Event{Type: TurnStart})
		if len(got) == 0 || got[len(got)-1] != uint64(len(got)) {
			t.Fatalf("after Publish the inline subscriber has %v: it was not called in Publish", got)
		}
	}
	stop()
	b.Publish(Event{Type: TurnEnd})
	if len(got) != 3 {
		t.Errorf("called after unsubscribing: %v", got)
	}
	panicky := b.Subscribe(func(Event) { panic("sink bug") }, Inline())
	defer panicky()
	b.Publish(Event{Type: TurnStart}) // logged, and the subscriber is removed
	if b.Active() {
		t.Error("a panicking inline subscriber is still subscribed")
	}
}
