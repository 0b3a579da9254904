package agent_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync/atomic"

	"github.com/agentry/agentry/agent"
	"github.com/agentry/agentry/event"
	"github.com/agentry/agentry/llm"
	"github.com/agentry/agentry/policy"
	"github.com/agentry/agentry/spec"
	"github.com/agentry/agentry/tool"
)

// A planner from a Go function decides each turn without a model: here it
// calls add once, then answers with what the tool returned.
func ExamplePlannerFunc() {
	add := tool.Must(tool.Func("add", "Add two integers.",
		func(_ context.Context, in addIn) (int, error) { return in.A + in.B, nil },
		tool.WithIdempotency(tool.Safe)))
	tools, _ := tool.NewRegistry(add)

	plan := agent.PlannerFunc(func(_ context.Context, t *agent.Turn) (agent.Decision, error) {
		if res := t.Results(); len(res) > 0 {
			return agent.Answer("the sum is " + string(res[0].Output)), nil
		}
		return agent.CallTools("add the numbers", llm.ToolCall{ID: "c1", Name: "add", Arguments: json.RawMessage(`{"a": 40, "b": 2}`)}), nil
	})
	// A service agent needs no model: its planner (here the function) decides.
	sp, _ := spec.Parse("example", []byte(`{"agent_name": "planned", "version": "v1", "mode": "service", "tools": ["add"]}`))
	a, err := agent.New(sp, agent.WithTools(tools), agent.WithPlanner(plan))
	if err != nil {
		fmt.Println(err)
		return
	}
	res, err := a.Run(context.Background(), nil)
	fmt.Println(res.Result, res.Iterations, err)
	// Output: the sum is 42 2 <nil>
}

// Tool middleware wraps every tool call of an agent, net/http style: here
// one counts the calls and another rewrites the arguments before the tool
// sees them. Options append; the first given is the outermost.
func ExampleWithToolMiddleware() {
	echo := tool.Must(tool.Func("echo", "Echo text.",
		func(_ context.Context, in struct {
			Text string `json:"text"`
		}) (string, error) {
			return in.Text, nil
		}, tool.WithIdempotency(tool.Safe)))
	tools, _ := tool.NewRegistry(echo)

	var calls atomic.Int64
	count := func(next tool.Handler) tool.Handler {
		return func(ctx context.Context, c *tool.Call) (tool.Output, error) {
			calls.Add(1)
			return next(ctx, c)
		}
	}
	shout := func(next tool.Handler) tool.Handler {
		return func(ctx context.Context, c *tool.Call) (tool.Output, error) {
			var args map[string]string
			if err := json.Unmarshal(c.Arguments, &args); err == nil {
				args["text"] = strings.ToUpper(args["text"])
				c.Arguments, _ = json.Marshal(args)
			}
			return next(ctx, c)
		}
	}
	plan := agent.PlannerFunc(func(_ context.Context, t *agent.Turn) (agent.Decision, error) {
		if res := t.Results(); len(res) > 0 {
			return agent.Answer(res[0].Observation), nil
		}
		return agent.CallTools("", llm.ToolCall{ID: "c1", Name: "echo", Arguments: json.RawMessage(`{"text": "hello"}`)}), nil
	})
	sp, _ := spec.Parse("example", []byte(`{"agent_name": "loud", "version": "v1", "mode": "service", "tools": ["echo"]}`))
	a, err := agent.New(sp, agent.WithTools(tools), agent.WithPlanner(plan),
		agent.WithToolMiddleware(count, shout))
	if err != nil {
		fmt.Println(err)
		return
	}
	res, _ := a.Run(context.Background(), nil)
	fmt.Println(res.Result, calls.Load())
	// Output: "HELLO" 1
}

// A rule of the host's own sits beside the spec's policy: here one blocks
// payments above a limit. The model sees a policy_violation observation
// and the run goes on; the decision is emitted as policy_decision (and
// audited in a stored run) under rules.NAME.
func ExampleWithRule() {
	pay := tool.Must(tool.Func("pay", "Pay an amount.",
		func(_ context.Context, in struct {
			Amount int `json:"amount"`
		}) (string, error) {
			return fmt.Sprint("paid ", in.Amount), nil
		}))
	tools, _ := tool.NewRegistry(pay)
	limit := policy.RuleFunc(func(_ context.Context, c policy.Call) policy.Verdict {
		var in struct {
			Amount int `json:"amount"`
		}
		if c.Tool == "pay" && json.Unmarshal(c.Arguments, &in) == nil && in.Amount > 100 {
			return policy.Verdict{Block: true, Reason: "payments above 100 need a person"}
		}
		return policy.Verdict{}
	})
	plan := agent.PlannerFunc(func(_ context.Context, t *agent.Turn) (agent.Decision, error) {
		if res := t.Results(); len(res) > 0 {
			return agent.Answer(res[0].Observation), nil
		}
		return agent.CallTools("pay", llm.ToolCall{ID: "c1", Name: "pay", Arguments: json.RawMessage(`{"amount": 250}`)}), nil
	})
	sp, _ := spec.Parse("example", []byte(`{"agent_name": "payer", "version": "v1", "mode": "service", "tools": ["pay"]}`))
	a, err := agent.New(sp, agent.WithTools(tools), agent.WithPlanner(plan), agent.WithRule("limit", limit))
	if err != nil {
		fmt.Println(err)
		return
	}
	res, _ := a.Run(context.Background(), nil, agent.WithEvents(func(e event.Event) {
		if e.Type == event.PolicyDecision {
			fmt.Println(e.Data["rule"], e.Data["decision"])
		}
	}))
	fmt.Println(res.Result)
	// Output:
	// rules.limit block
	// {"status":"error","error":{"type":"policy_violation","message":"payments above 100 need a person","details":{"rule":"rules.limit"},"recoverable":true}}
}
