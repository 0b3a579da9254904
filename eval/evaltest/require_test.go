package evaltest_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/agentry/agentry/agent"
	"github.com/agentry/agentry/eval"
	"github.com/agentry/agentry/eval/evaltest"
	"github.com/agentry/agentry/llm"
	"github.com/agentry/agentry/spec"
)

// sorter sends every ticket to billing: right for a refund, wrong for a
// crash.
func sorter(t *testing.T) *agent.Agent {
	t.Helper()
	m := llm.ProviderFunc(func(context.Context, *llm.Request) (*llm.Response, error) {
		return &llm.Response{Content: `{"queue": "billing"}`}, nil
	})
	a, err := agent.New(&spec.Spec{AgentName: "sorter", Version: "v1", SystemText: "Sort.", InputKeys: []string{"ticket"},
		OutputSchema: json.RawMessage(`{"type": "object", "properties": {"queue": {"type": "string"}}, "required": ["queue"]}`)},
		agent.WithProvider(m, "test"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { a.Close() })
	return a
}

// Require fails a test whose agent passes too few cases, naming them.
func TestRequire(t *testing.T) {
	ds, _ := eval.Parse("inline", []byte(`{"name": "sort", "cases": [
		{"name": "refund", "input": {"ticket": "money back"}, "expected": {"queue": "billing"}, "assert": [{"type": "equals"}]},
		{"name": "crash", "input": {"ticket": "it crashes"}, "expected": {"queue": "tech"}, "assert": [{"type": "equals"}]}]}`))
	targets := []eval.Target{{Label: "sorter@v1", Agent: sorter(t)}}
	rep := evaltest.Require(t, ds, targets, eval.Options{}, 0.5)
	if rep.Agents[0].Passed != 1 {
		t.Errorf("%+v", rep.Agents[0])
	}
	ft := &fakeT{TB: t}
	evaltest.Require(ft, ds, targets, eval.Options{}, 0.9)
	if !ft.failed || !strings.Contains(ft.msg, "sorter@v1 passed 1 of 2 (50%), under 90%") || !strings.Contains(ft.msg, `crash#1 equals: the output {"queue":"billing"} does not match {"queue":"tech"}`) {
		t.Errorf("failed %v: %s", ft.failed, ft.msg)
	}
}

// fakeT records a failure instead of failing the test.
type fakeT struct {
	testing.TB
	failed bool
	msg    string
}

func (f *fakeT) Errorf(format string, args ...any) {
	f.failed, f.msg = true, fmt.Sprintf(format, args...)
}
func (f *fakeT) Helper() {}
