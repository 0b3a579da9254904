package event

import (
	"testing"
	"time"
)

// BenchmarkRunOfEvents is what a run of 40 events costs its bus with one
// subscriber: the subscription, the publishes, the flush at the end.
func BenchmarkRunOfEvents(b *testing.B) {
	n := 0
	b.ReportAllocs()
	for b.Loop() {
		var bus Bus
		stop := bus.Subscribe(func(Event) { n++ })
		for i := range 40 {
			bus.Publish(Event{Type: TurnStart, RunID: "run", AgentName: "bench", Turn: i, Time: time.Now()})
		}
		bus.Flush()
		stop()
	}
}
