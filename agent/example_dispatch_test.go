package agent_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/agentry/agentry/agent"
	"github.com/agentry/agentry/agent/drive"
	"github.com/agentry/agentry/llm/scripted"
	"github.com/agentry/agentry/runlog"
	"github.com/agentry/agentry/spec"
	"github.com/agentry/agentry/store"
	_ "github.com/agentry/agentry/store/sqlite"
	"github.com/agentry/agentry/tool"
)

// A run driven a turn at a time by a host that runs its tool calls
// itself, as a durable-execution engine does: each stop hands the turn's
// calls out, and a resume given their results goes on.
func ExampleDrive() {
	dir, _ := os.MkdirTemp("", "dispatch")
	defer os.RemoveAll(dir)
	ctx := context.Background()
	st, err := store.Open(ctx, filepath.Join(dir, "runs.db"))
	if err != nil {
		fmt.Println(err)
		return
	}
	defer st.Close()

	add := tool.Must(tool.Func("add", "Add two integers.",
		func(_ context.Context, in addIn) (int, error) { return in.A + in.B, nil },
		tool.WithIdempotency(tool.Safe)))
	script, _ := scripted.New("example",
		scripted.Turn{ToolCalls: []scripted.ToolCall{{Name: "add", Arguments: addIn{A: 2, B: 3}}}},
		scripted.Turn{Content: "2 + 3 = 5"})
	a, err := agent.New(&spec.Spec{AgentName: "adder", Version: "v1", SystemText: "You add numbers."},
		agent.WithProvider(script.Model(), "scripted"), agent.Use(add))
	if err != nil {
		fmt.Println(err)
		return
	}

	const id, driver = "run_example", "example:run_example"
	sess, _ := a.NewSession(nil, agent.WithStore(st), agent.Drive(drive.Plan{RunID: id, Driver: driver, Dispatch: true}))
	res, err := sess.Run(ctx)
	var de *drive.DispatchError
	for errors.As(err, &de) {
		results := map[string]runlog.ToolResult{}
		for _, c := range de.Calls {
			fmt.Println("handed out:", c.Key, c.Tool, string(c.Arguments))
			results[c.Key] = a.Exec(ctx, &tool.Run{RunID: id}, c, nil) // anywhere, once
		}
		if sess, err = a.Resume(ctx, st, id, agent.Drive(drive.Plan{Driver: driver, Dispatch: true, Results: results})); err != nil {
			break
		}
		res, err = sess.Run(ctx)
	}
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(res.Result, res.Iterations, res.Steps[0].Observation)
	// Output:
	// handed out: run_example:1:0 add {"a":2,"b":3}
	// 2 + 3 = 5 2 5
}
