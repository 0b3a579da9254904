package runlog_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	"github.com/agentry/agentry/agent"
	_ "github.com/agentry/agentry/llm/scripted"
	"github.com/agentry/agentry/runlog"
	"github.com/agentry/agentry/store"
	_ "github.com/agentry/agentry/store/sqlite"
	"github.com/agentry/agentry/tool"
)

// A run stored as it happens, then read back from its log.
func ExampleRead() {
	dir, _ := os.MkdirTemp("", "agentry-example")
	defer os.RemoveAll(dir)
	ctx := context.Background()
	st, err := store.Open(ctx, filepath.Join(dir, "runs.db"))
	if err != nil {
		fmt.Println(err)
		return
	}
	defer st.Close()

	a, err := agent.FromFile("../examples/adder/agent.json", agent.WithTools(adderTools()))
	if err != nil {
		fmt.Println(err)
		return
	}
	res, err := a.Run(ctx, map[string]any{"task": "add 2 and 3"}, agent.WithStore(st))
	if err != nil {
		fmt.Println(err)
		return
	}
	run, _ := st.Get(ctx, res.ID)
	log, err := runlog.Read(ctx, st, res.ID)
	if err != nil {
		fmt.Println(err)
		return
	}
	calls := log.ToolCalls()
	fmt.Println(run.Status, len(log.ModelCalls), "model calls,", len(calls), "tool call")
	for _, c := range calls {
		fmt.Println(c.Tool, string(c.Arguments), "→", string(c.Output))
	}
	// Output:
	// completed 2 model calls, 1 tool call
	// add {"a": 2, "b": 3} → 5
}

func adderTools() *tool.Registry {
	add := tool.Must(tool.Func("add", "Add two integers.",
		func(_ context.Context, in addIn) (int, error) { return in.A + in.B, nil },
		tool.WithIdempotency(tool.Safe)))
	tools, _ := tool.NewRegistry(add)
	return tools
}

type addIn struct {
	A int `json:"a"`
	B int `json:"b"`
}
