package eval_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync/atomic"
	"testing"

	"go.uber.org/goleak"

	"github.com/agentry/agentry/agent"
	"github.com/agentry/agentry/eval"
	"github.com/agentry/agentry/internal/testdb"
	"github.com/agentry/agentry/internal/teststore"
	"github.com/agentry/agentry/llm"
	"github.com/agentry/agentry/spec"
	"github.com/agentry/agentry/store"
	_ "github.com/agentry/agentry/store/postgres"
	_ "github.com/agentry/agentry/store/sqlite"
	"github.com/agentry/agentry/tool"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// triager is a model that sorts tickets, wrong on purpose where fixed
// says (v1 sends crashes to billing; v2 looks up an order for a pro
// plan). Each call reports 10 + 5 tokens.
type triager struct {
	v2    bool
	calls atomic.Int64
}

func (m *triager) Generate(_ context.Context, req *llm.Request) (*llm.Response, error) {
	m.calls.Add(1)
	u := llm.Usage{PromptTokens: 10, CompletionTokens: 5, TotalTokens: 15}
	var ticket string
	for _, msg := range req.Messages {
		if msg.Role == llm.RoleUser {
			ticket = msg.Content
		}
	}
	last := req.Messages[len(req.Messages)-1]
	lookup := strings.Contains(ticket, "money") || m.v2 && strings.Contains(ticket, "pro plan")
	if lookup && last.Role != llm.RoleTool {
		return &llm.Response{ToolCalls: []llm.ToolCall{{ID: "c1", Name: "lookup_order", Arguments: json.RawMessage(`{"order": "A1"}`)}}, Usage: u}, nil
	}
	queue := "sales"
	switch {
	case strings.Contains(ticket, "money"):
		queue = "billing"
	case strings.Contains(ticket, "crashes"):
		queue = map[bool]string{false: "billing", true: "tech"}[m.v2]
	}
	return &llm.Response{Content: `{"queue": "` + queue + `"}`, Usage: u}, nil
}

func triageAgent(t *testing.T, version string, m llm.Provider) *agent.Agent {
	t.Helper()
	lookup := tool.Must(tool.Func("lookup_order", "Finds an order.", func(_ context.Context, in struct {
		Order string `json:"order"`
	}) (string, error) {
		return "order " + in.Order + ": paid", nil
	}, tool.WithIdempotency(tool.Safe)))
	a, err := agent.New(&spec.Spec{AgentName: "triage", Version: version, ModelName: "triage-model",
		SystemText: "Sort the ticket.", InputKeys: []string{"ticket"},
		OutputSchema: json.RawMessage(`{"type": "object", "properties": {"queue": {"type": "string"}}, "required": ["queue"]}`),
		Pricing:      map[string]llm.Price{"triage-model": {Prompt: 1, Completion: 2}}},
		agent.WithProvider(m, "test"), agent.Use(lookup))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { a.Close() })
	return a
}

// Two versions of an agent on one dataset, on SQLite and Postgres: the
// numbers of the report, checked exactly; the comparison's regressions
// and fixes; the runs stored as the evaluation's children; the report
// stored.
func TestRun(t *testing.T) {
	for _, backend := range []string{"sqlite", "postgres"} {
		t.Run(backend, func(t *testing.T) {
			dsn := testdb.SQLite(t)
			if backend == "postgres" {
				dsn = testdb.Postgres(t)
			}
			st, err := store.Open(context.Background(), dsn)
			if err != nil {
				t.Fatal(err)
			}
			defer st.Close()
			testRun(t, st)
		})
	}
}

func testRun(t *testing.T, st store.Store) {
	ds, err := eval.Load("testdata/triage.json")
	if err != nil {
		t.Fatal(err)
	}
	v1, v2 := &triager{}, &triager{v2: true}
	var progress []int
	rep, err := eval.Run(context.Background(), ds, []eval.Target{
		{Label: "triage@v1", Agent: triageAgent(t, "v1", v1)}, {Label: "triage@v2", Agent: triageAgent(t, "v2", v2)}},
		eval.Options{Store: st, Concurrency: 2, Progress: func(done, total int) { progress = append(progress, done*10+total) }})
	if err != nil {
		t.Fatal(err)
	}
	a1, a2 := rep.Agents[0], rep.Agents[1]
	if a1.Passed != 2 || a1.Total != 3 || a1.PassRate != 2.0/3 || a2.Passed != 2 {
		t.Errorf("v1 %d/%d (%v), v2 %d/%d", a1.Passed, a1.Total, a1.PassRate, a2.Passed, a2.Total)
	}
	// v1: refund takes 2 model calls, crash and upsell 1 each: 4 calls,
	// 60 tokens, 4 turns over 3 tasks, one lookup that did not fail.
	if a1.TokenUsage != 60 || a1.StepsPerTask != 4.0/3 || a1.ToolCalls != 1 || a1.ToolErrorRate != 0 || a1.ToolLatencyMS["lookup_order"].Calls != 1 {
		t.Errorf("v1 figures: %+v", a1)
	}
	if a1.CostUSD == nil || *a1.CostUSD != 4*(10*1+5*2)/1e6 {
		t.Errorf("v1 cost %v", a1.CostUSD)
	}
	if a1.Tags["billing"] != (eval.TagScore{Passed: 1, Total: 1}) || a1.Tags["tech"] != (eval.TagScore{Passed: 0, Total: 1}) {
		t.Errorf("tags %+v", a1.Tags)
	}
	crash := a1.Cases[1]
	if crash.Case != "crash" || crash.Passed || crash.Checks[1].Passed || !crash.Checks[2].Passed ||
		!strings.Contains(crash.Checks[1].Reason, `{"queue":"billing"} does not match {"queue":"tech"}`) {
		t.Errorf("crash: %+v", crash)
	}
	c := rep.Comparison
	if c == nil || strings.Join(c.Regressions, ",") != "upsell#1" || strings.Join(c.Fixes, ",") != "crash#1" || c.TokenDelta != 15 {
		t.Errorf("comparison %+v", c)
	}
	if len(progress) != 6 || progress[5] != 66 {
		t.Errorf("progress %v", progress)
	}
	runs, err := st.List(context.Background(), store.Filter{ParentID: rep.ID})
	if err != nil || len(runs) != 6 {
		t.Fatalf("%d runs of the evaluation, %v", len(runs), err)
	}
	stored, err := eval.Stored(context.Background(), st, rep.ID)
	if err != nil || stored.Agents[1].Passed != 2 || stored.Comparison.Regressions[0] != "upsell#1" {
		t.Errorf("stored: %+v, %v", stored, err)
	}
	if list, err := eval.List(context.Background(), st, store.Filter{}); err != nil || len(list) != 1 || list[0].ID != rep.ID || list[0].Outcome != "4/6 passed" {
		t.Errorf("list %+v, %v", list, err)
	}
	if _, err := eval.Stored(context.Background(), st, runs[0].ID); !errors.Is(err, eval.ErrNotEvaluation) {
		t.Errorf("a run's id: %v", err)
	}
}

// Trials: a case that passes in one trial of two counts for pass@k, and
// half for the pass rate.
func TestTrials(t *testing.T) {
	ds, _ := eval.Parse("inline", []byte(`{"name": "flaky", "cases": [{"name": "c", "input": {"ticket": "hello"},
		"assert": [{"type": "regex", "value": "odd"}]}]}`))
	n := 0
	m := llm.ProviderFunc(func(context.Context, *llm.Request) (*llm.Response, error) {
		n++
		return &llm.Response{Content: map[bool]string{true: "odd", false: "even"}[n%2 == 1]}, nil
	})
	a, err := agent.New(&spec.Spec{AgentName: "flaky", Version: "v1", SystemText: "Say.", InputKeys: []string{"ticket"}}, agent.WithProvider(m, "test"))
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	rep, err := eval.Run(context.Background(), ds, []eval.Target{{Label: "flaky@v1", Agent: a}}, eval.Options{Store: teststore.Open(t), Trials: 2})
	if err != nil {
		t.Fatal(err)
	}
	if r := rep.Agents[0]; r.PassRate != 0.5 || r.PassAtK != 1 || r.Total != 2 {
		t.Errorf("%+v", r)
	}
}

// A rescore with a changed assertion scores the stored runs again: no
// model or tool is called, the new verdicts are stored as a new
// evaluation naming the old one.
func TestRescore(t *testing.T) {
	ds, _ := eval.Load("testdata/triage.json")
	st := teststore.Open(t)
	m := &triager{}
	rep, err := eval.Run(context.Background(), ds, []eval.Target{{Label: "triage@v1", Agent: triageAgent(t, "v1", m)}}, eval.Options{Store: st})
	if err != nil || rep.Agents[0].Passed != 2 {
		t.Fatalf("%v %+v", err, rep)
	}
	calls := m.calls.Load()
	// The crash case now only asks for a known queue.
	ds.Cases[1].Assert = ds.Cases[1].Assert[1:]
	again, err := eval.Rescore(context.Background(), st, rep.ID, ds, nil)
	if err != nil {
		t.Fatal(err)
	}
	if m.calls.Load() != calls {
		t.Errorf("the rescore called the model %d times", m.calls.Load()-calls)
	}
	if a := again.Agents[0]; a.Passed != 3 || a.Cases[1].RunID != rep.Agents[0].Cases[1].RunID || again.RescoreOf != rep.ID {
		t.Errorf("rescored: %+v", again)
	}
	if stored, err := eval.Stored(context.Background(), st, again.ID); err != nil || stored.Agents[0].Passed != 3 {
		t.Errorf("the stored rescore: %v", err)
	}
	// Against the first as a baseline: a fix, no regression.
	again.AgainstBaseline(rep)
	if c := again.Baseline; len(c.Regressions) != 0 || strings.Join(c.Fixes, ",") != "crash#1" || c.Baseline != rep.ID {
		t.Errorf("comparison %+v", c)
	}
}

// A run that fails fails its case, whatever else its assertions say, and
// a judge is not asked about it; a case that says how its run should end
// decides itself. A run refused for its input is a failed case too, and
// a rescore scores it again.
func TestFailedRuns(t *testing.T) {
	ds, err := eval.Parse("inline", []byte(`{"name": "failing", "cases": [
		{"name": "errs", "input": {"ticket": "x"}, "assert": [{"type": "not_contains", "value": "secret"}, {"type": "max_steps", "value": 5},
			{"type": "judge", "agent": "j", "rubric": "r"}]},
		{"name": "expected-to-fail", "input": {"ticket": "x"}, "assert": [{"type": "outcome", "value": "error"}]},
		{"name": "no-assertions", "input": {"ticket": "x"}},
		{"name": "refused", "input": {"tiket": "x"}}]}`))
	if err != nil {
		t.Fatal(err)
	}
	m := llm.ProviderFunc(func(context.Context, *llm.Request) (*llm.Response, error) {
		return nil, &llm.APIError{Status: 400, Message: "bad request"}
	})
	a, err := agent.New(&spec.Spec{AgentName: "broken", Version: "v1", SystemText: "Fail.", InputKeys: []string{"ticket"}}, agent.WithProvider(m, "test"))
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	judged := 0
	judge := func(context.Context, string, string, map[string]any) (float64, string, string, error) {
		judged++
		return 1, "", "", nil
	}
	st := teststore.Open(t)
	rep, err := eval.Run(context.Background(), ds, []eval.Target{{Label: "broken@v1", Agent: a}}, eval.Options{Store: st, Judge: judge})
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]bool{}
	for _, cr := range rep.Agents[0].Cases {
		got[cr.Case] = cr.Passed
	}
	if got["errs"] || !got["expected-to-fail"] || got["no-assertions"] || got["refused"] || judged != 0 {
		t.Errorf("passed %v, %d judged", got, judged)
	}
	if first := rep.Agents[0].Cases[0].Checks[0]; first.Type != "run" || !strings.Contains(first.Reason, "the run failed") {
		t.Errorf("the failed run's check %+v", first)
	}
	again, err := eval.Rescore(context.Background(), st, rep.ID, ds, nil)
	if err != nil || again.Agents[0].Passed != 1 {
		t.Errorf("rescore: %+v, %v", again, err)
	}
}
