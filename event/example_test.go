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
	// Output:
	// 1 run_start
	// 2 run_end
}
