package temporal_test

import (
	"context"
	"fmt"
	"log"

	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/worker"

	"github.com/agentry/agentry/agent"
	"github.com/agentry/agentry/store"
	_ "github.com/agentry/agentry/store/postgres"
	"github.com/agentry/agentry/temporal"
	"github.com/agentry/agentry/tool"
)

// A worker runs the agents of a directory as workflows, with its tools;
// a client starts a run, waits until it ends or pauses for approval,
// and decides what it waits for. (It needs a Temporal server and the
// store the workers share: it is not run as a test.)
func Example() {
	ctx := context.Background()
	st, err := store.Open(ctx, "postgres://agentry@db/agentry")
	if err != nil {
		log.Fatal(err)
	}
	dc, err := temporal.DataConverter(st, nil) // a 32-byte key seals every payload
	if err != nil {
		log.Fatal(err)
	}
	c, err := client.Dial(client.Options{HostPort: "127.0.0.1:7233", DataConverter: dc})
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()

	// The worker.
	tools, _ := tool.NewRegistry( /* the tools the agents use */ )
	w := worker.New(c, "agentry", temporal.WorkerOptions())
	if err := temporal.Register(w, temporal.Config{Store: st, Agents: "agents",
		Options: []agent.Option{agent.WithTools(tools)}}); err != nil {
		log.Fatal(err)
	}
	go w.Run(worker.InterruptCh())

	// A client.
	id, err := temporal.Start(ctx, c, "agentry", temporal.Request{Agent: "travel@1.0.0",
		Input: map[string]any{"city": "Lisbon"}, UserID: "ann"})
	if err != nil {
		log.Fatal(err)
	}
	out, err := temporal.Await(ctx, c, id, 0)
	for err == nil && out.Status == "awaiting_approval" {
		p, _ := temporal.Query(ctx, c, id)
		if err = temporal.Decide(ctx, c, id, temporal.Decision{Approve: []string{p.Waiting[0].Key}, By: "bob"}); err == nil {
			out, err = temporal.Await(ctx, c, id, p.Pauses)
		}
	}
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(out.Status, string(out.Result))
}
