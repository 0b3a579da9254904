package eval_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/agentry/agentry/agent"
	"github.com/agentry/agentry/eval"
	"github.com/agentry/agentry/llm"
	"github.com/agentry/agentry/spec"
	"github.com/agentry/agentry/store"
)

// An agent on a dataset of two cases: one passes, one fails, and the
// report says which and why. Every case is a stored run of the
// evaluation.
func ExampleRun() {
	ds, _ := eval.Parse("inline", []byte(`{"name": "greetings", "cases": [
		{"name": "ada", "input": {"who": "Ada"}, "assert": [{"type": "contains", "value": "Ada"}]},
		{"name": "bob", "input": {"who": "Bob"}, "assert": [{"type": "regex", "value": "^Good evening"}]}]}`))
	model := llm.ProviderFunc(func(_ context.Context, req *llm.Request) (*llm.Response, error) {
		who := req.Messages[len(req.Messages)-1].Content
		return &llm.Response{Content: "Hello, " + strings.TrimPrefix(who, "who: ") + "!"}, nil
	})
	a, _ := agent.New(&spec.Spec{AgentName: "greeter", Version: "v1", SystemText: "Greet.", InputKeys: []string{"who"}},
		agent.WithProvider(model, "example"))
	defer a.Close()
	dir, _ := os.MkdirTemp("", "eval-example")
	defer os.RemoveAll(dir)
	st, _ := store.Open(context.Background(), filepath.Join(dir, "runs.db"))
	defer st.Close()

	rep, err := eval.Run(context.Background(), ds, []eval.Target{{Label: "greeter@v1", Agent: a}}, eval.Options{Store: st})
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, r := range rep.Agents {
		fmt.Printf("%s passed %d of %d\n", r.Agent, r.Passed, r.Total)
		for _, c := range r.Cases {
			fmt.Println(c.Case, c.Passed, c.Checks[0].Reason, "(run "+c.RunID[:4]+"…)")
		}
	}
	// Output:
	// greeter@v1 passed 1 of 2
	// ada true  (run run_…)
	// bob false the output does not match /^Good evening/ (run run_…)
}
