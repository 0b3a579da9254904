package agent_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/agentry/agentry/agent"
	"github.com/agentry/agentry/llm/scripted"
	"github.com/agentry/agentry/policy"
	"github.com/agentry/agentry/spec"
	"github.com/agentry/agentry/store"
	_ "github.com/agentry/agentry/store/sqlite"
	"github.com/agentry/agentry/tool"
)

type refundIn struct {
	Order  string `json:"order"`
	Amount int    `json:"amount"`
}

// refunds is the support agent of the example: refunds wait for a
// person's approval (its policy), and its offline model asks for two in
// one turn, then answers. It is built the same way before and after the
// pause, as a process that restarts would build it.
func refunds(paid *[]string) (*agent.Agent, error) {
	refund := tool.Must(tool.Func("refund", "Refund an order.",
		func(_ context.Context, in refundIn) (string, error) {
			*paid = append(*paid, fmt.Sprintf("%s:%d", in.Order, in.Amount))
			return "refunded", nil
		}, tool.WithIdempotency(tool.NonIdempotent)))
	script, err := scripted.New("support",
		scripted.Turn{ToolCalls: []scripted.ToolCall{
			{ID: "r1", Name: "refund", Arguments: refundIn{Order: "A-1", Amount: 20}},
			{ID: "r2", Name: "refund", Arguments: refundIn{Order: "B-2", Amount: 900}}}},
		scripted.Turn{Content: "A-1 is refunded; B-2 was refused."})
	if err != nil {
		return nil, err
	}
	rules, err := policy.Parse([]byte(`{"approval": {"tools": ["refund"]}}`))
	if err != nil {
		return nil, err
	}
	return agent.New(&spec.Spec{AgentName: "support", Version: "v1", SystemText: "You handle refunds.", Policy: rules},
		agent.WithProvider(script.Model(), "scripted"), agent.Use(refund))
}

// A run pauses on the calls its policy holds for a person: Run's error
// is an *ApprovalError for errors.As, and the Result lists every waiting
// call. A resume, in this process or another, approves one call, denies
// the other, and the run goes on from where it stopped: nothing runs
// twice, and the model's script plays on.
func ExampleAgent_Resume() {
	ctx := context.Background()
	dir, _ := os.MkdirTemp("", "agentry-example")
	defer os.RemoveAll(dir)
	st, err := store.Open(ctx, filepath.Join(dir, "runs.db"))
	if err != nil {
		fmt.Println(err)
		return
	}
	defer st.Close()

	var paid []string
	a, err := refunds(&paid)
	if err != nil {
		fmt.Println(err)
		return
	}
	res, err := a.Run(ctx, map[string]any{}, agent.WithStore(st))
	var waiting *agent.ApprovalError
	if errors.As(err, &waiting) {
		fmt.Println("paused:", res.TerminateReason, "on", len(res.Waiting), "calls; the first is", waiting.Tool, string(waiting.Arguments))
	}
	var approve, deny []string
	for _, w := range res.Waiting {
		line := fmt.Sprintln(" ", w.Key, w.Tool, string(w.Arguments), "-", w.Reason)
		fmt.Print(strings.ReplaceAll(line, res.ID, "RUN")) // keys are RUN_ID:TURN:INDEX
		if w.CallID == "r1" {
			approve = append(approve, w.Key)
		} else {
			deny = append(deny, w.Key)
		}
	}

	// Later, perhaps in another process: the same agent, built again.
	b, err := refunds(&paid)
	if err != nil {
		fmt.Println(err)
		return
	}
	sess, err := b.Resume(ctx, st, res.ID, agent.Approve(approve...), agent.Deny(deny...),
		agent.WithDenyReason("over the limit"), agent.DecidedBy("ana"))
	if err != nil {
		fmt.Println(err)
		return
	}
	res, err = sess.Run(ctx)
	fmt.Println("resumed:", res.TerminateReason, err, "-", res.Result)
	fmt.Println("refunds made:", paid)
	// Output:
	// paused: awaiting_approval on 2 calls; the first is refund {"order":"A-1","amount":20}
	//   RUN:1:0 refund {"order":"A-1","amount":20} - call r1 (refund, key RUN:1:0) waits for a person's approval (policy.approval.tools)
	//   RUN:1:1 refund {"order":"B-2","amount":900} - call r2 (refund, key RUN:1:1) waits for a person's approval (policy.approval.tools)
	// resumed: completed <nil> - A-1 is refunded; B-2 was refused.
	// refunds made: [A-1:20]
}
