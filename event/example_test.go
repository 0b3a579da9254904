package event_test

import (
	"fmt"

	"github.com/agentry/agentry/event"
)

func ExampleBus() {
	var bus event.Bus
	stop := bus.Subscribe(func(e event.Event) { fmt.Println(e.Seq, e.Type) })
	defer stop()
	bus.Publish(event.Event{Type: event.RunStart})
	bus.Publish(event.Event{Type: event.RunEnd})
	bus.Flush() // subscribers run on their own goroutines
	// Output:
	// 1 run_start
	// 2 run_end
}

// A sink that must not lose an event blocks the publisher when it falls a
// buffer behind; a live view (the default) drops and counts instead.
func ExampleBlock() {
	var bus event.Bus
	n := 0
	stop := bus.Subscribe(func(event.Event) { n++ }, event.Block(), event.Buffer(8))
	defer stop()
	for range 100 {
		bus.Publish(event.Event{Type: event.ContentChunk})
	}
	bus.Flush()
	fmt.Println(n)
	// Output: 100
}
