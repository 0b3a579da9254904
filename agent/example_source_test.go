package agent_test

import (
	"context"
	"fmt"
	"strings"

	"github.com/agentry/agentry/agent"
	"github.com/agentry/agentry/llm/scripted"
	"github.com/agentry/agentry/spec"
	"github.com/agentry/agentry/tool"
)

// clock is a source of "clock:ZONE" tools entries: a tool per zone, as a
// package of tools registers its scheme with tool.RegisterSource (as
// tool/mcp does for "mcp:" entries).
type clock struct{}

func (clock) Open(_ context.Context, req tool.SourceRequest) ([]tool.Set, error) {
	var tools []tool.Tool
	for _, entry := range req.Entries {
		zone := strings.TrimPrefix(entry, "clock:")
		tools = append(tools, tool.Must(tool.Func("time_in_"+zone, "The time in "+zone+".",
			func(context.Context, struct{}) (string, error) { return "12:00 in " + zone, nil }, tool.WithIdempotency(tool.Safe))))
	}
	return []tool.Set{fixedSet(tools)}, nil
}

// fixedSet is tools that do not change.
type fixedSet []tool.Tool

func (fixedSet) Name() string                                 { return "clock" }
func (s fixedSet) Tools(context.Context) ([]tool.Tool, error) { return s, nil }
func (fixedSet) Changes() uint64                              { return 0 }
func (fixedSet) Close() error                                 { return nil }

// A spec's tools entries of a scheme come from its source: here one the
// agent is given (agent.WithSource); a package's own registers itself.
func ExampleWithSource() {
	script, _ := scripted.New("example",
		scripted.Turn{ToolCalls: []scripted.ToolCall{{Name: "time_in_lisbon", Arguments: struct{}{}}}},
		scripted.Turn{Content: "It is noon in Lisbon."})
	a, err := agent.New(&spec.Spec{AgentName: "clock", Version: "v1", SystemText: "Tell the time.", Tools: []string{"clock:lisbon"}},
		agent.WithProvider(script.Model(), "scripted"), agent.WithSource("clock", clock{}))
	if err != nil {
		fmt.Println(err)
		return
	}
	defer a.Close()
	res, _ := a.Run(context.Background(), map[string]any{"task": "What time is it in Lisbon?"})
	fmt.Println(res.ToolsUsed, res.Steps[0].Observation)
	fmt.Println(res.Result)
	// Output:
	// [time_in_lisbon] "12:00 in lisbon"
	// It is noon in Lisbon.
}
