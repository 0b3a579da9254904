package server

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/agentry/agentry/agent"
	evaluation "github.com/agentry/agentry/eval"
	"github.com/agentry/agentry/llm"
	"github.com/agentry/agentry/spec"
	"github.com/agentry/agentry/store"
	"github.com/agentry/agentry/tool"
)

// triageData is a dataset of five support tickets, each to be sent to a
// queue; refunds and invoices need the order looked up.
const triageData = `{"name": "support-triage", "assert": [{"type": "max_steps", "value": 3}], "cases": [
 {"name": "refund", "input": {"ticket": "I want my money back"}, "expected": {"queue": "billing"}, "tags": ["billing"],
  "assert": [{"type": "equals_subset"}, {"type": "tool_called", "tool": "lookup_order", "args": {"order": "A1"}}]},
 {"name": "crash", "input": {"ticket": "The app crashes on start"}, "expected": {"queue": "tech"}, "tags": ["tech"],
  "assert": [{"type": "equals_subset"}, {"type": "enum", "field": "queue", "value": ["billing", "tech", "sales", "account"]}]},
 {"name": "upsell", "input": {"ticket": "Do you have a pro plan?"}, "expected": {"queue": "sales"}, "tags": ["sales"],
  "assert": [{"type": "equals", "field": "queue"}, {"type": "tool_not_called", "tool": "lookup_order"}]},
 {"name": "password", "input": {"ticket": "I forgot my password"}, "expected": {"queue": "account"}, "tags": ["account"],
  "assert": [{"type": "equals_subset"}]},
 {"name": "invoice", "input": {"ticket": "Send me the invoice for my last order"}, "expected": {"queue": "billing"}, "tags": ["billing"],
  "assert": [{"type": "equals_subset"}, {"type": "tool_called", "tool": "lookup_order"}]}
]}`

// triageQueues are where each version sends the tickets, wrong on
// purpose: v1 sends crashes to billing; v2 gets crashes right and sends
// passwords to tech; v3 gets all right but invoices, sent to sales
// without a lookup.
var triageQueues = map[string]map[string]string{
	"v1": {"money": "billing", "crashes": "billing", "pro plan": "sales", "password": "account", "invoice": "billing"},
	"v2": {"money": "billing", "crashes": "tech", "pro plan": "sales", "password": "tech", "invoice": "billing"},
	"v3": {"money": "billing", "crashes": "tech", "pro plan": "sales", "password": "account", "invoice": "sales"},
}

// triageModel answers as version v: a lookup first for the tickets that
// need one (v3 skips the invoice's), then the queue. Each call reports
// 40 + 10 tokens.
func triageModel(v string) llm.Provider {
	return llm.ProviderFunc(func(_ context.Context, req *llm.Request) (*llm.Response, error) {
		u := llm.Usage{PromptTokens: 40, CompletionTokens: 10, TotalTokens: 50}
		var ticket string
		for _, m := range req.Messages {
			if m.Role == llm.RoleUser {
				ticket = m.Content
			}
		}
		queue := ""
		for word, q := range triageQueues[v] {
			if strings.Contains(ticket, word) {
				queue = q
			}
		}
		lookup := strings.Contains(ticket, "money") || strings.Contains(ticket, "invoice") && v != "v3"
		if lookup && req.Messages[len(req.Messages)-1].Role != llm.RoleTool {
			return &llm.Response{ToolCalls: []llm.ToolCall{{ID: "c1", Name: "lookup_order", Arguments: json.RawMessage(`{"order": "A1"}`)}}, Usage: u}, nil
		}
		return &llm.Response{Content: `{"queue": "` + queue + `"}`, Usage: u}, nil
	})
}

// triageAgent is version v of the triage agent, priced.
func triageAgent(t *testing.T, v string) evaluation.Target {
	t.Helper()
	lookup := tool.Must(tool.Func("lookup_order", "Finds an order.", func(_ context.Context, in struct {
		Order string `json:"order"`
	}) (string, error) {
		return "order " + in.Order + ": paid", nil
	}, tool.WithIdempotency(tool.Safe)))
	a, err := agent.New(&spec.Spec{AgentName: "triage", Version: v, ModelName: "triage-model", SystemText: "Send the ticket to a queue.",
		InputKeys:    []string{"ticket"},
		OutputSchema: json.RawMessage(`{"type": "object", "properties": {"queue": {"type": "string"}}, "required": ["queue"]}`),
		Pricing:      map[string]llm.Price{"triage-model": {Prompt: 2.5, Completion: 10}}},
		agent.WithProvider(triageModel(v), "test"), agent.Use(lookup))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { a.Close() })
	return evaluation.Target{Label: "triage@" + v, Agent: a}
}

// storedEvals stores, in order, three evaluations of the triage dataset:
// v1 and v2 side by side (v2 fixes crash and breaks password), v3 alone
// (against v2: password fixed, invoice broken), and a rescore of the
// first. It answers their reports.
func storedEvals(t *testing.T, st store.Store) (sides, v3, rescore *evaluation.Report) {
	t.Helper()
	ctx := context.Background()
	ds, err := evaluation.Parse("triage.json", []byte(triageData))
	if err != nil {
		t.Fatal(err)
	}
	sides, err = evaluation.Run(ctx, ds, []evaluation.Target{triageAgent(t, "v1"), triageAgent(t, "v2")}, evaluation.Options{Store: st})
	if err != nil {
		t.Fatal(err)
	}
	v3, err = evaluation.Run(ctx, ds, []evaluation.Target{triageAgent(t, "v3")}, evaluation.Options{Store: st, Concurrency: 2})
	if err != nil {
		t.Fatal(err)
	}
	rescore, err = evaluation.Rescore(ctx, st, sides.ID, ds, nil)
	if err != nil {
		t.Fatal(err)
	}
	return sides, v3, rescore
}

// TestEvalsList: GET /v1/evals lists the evaluations newest first, each
// with its summary, agents and pass rates, and what a rescore scored
// again, paged by cursor; GET /v1/runs lists the case runs and not the
// evaluations; a viewer's key that reaches every user's reads them (they
// are the local operator's, run by agentry eval), another viewer's finds
// none, no key does not.
func TestEvalsList(t *testing.T) {
	f := newFixture(t, Config{Keys: []Key{{Name: "val", SHA256: HashKey("view-key"), Role: RoleViewer, AllUsers: true},
		{Name: "eve", SHA256: HashKey("eve-key"), Role: RoleViewer}}})
	sides, v3, rescore := storedEvals(t, f.st)
	code, body := f.do(t, "GET", "/v1/evals", "view-key", "")
	if code != 200 {
		t.Fatalf("%d %v", code, body)
	}
	var list struct {
		Evals []evalView `json:"evals"`
	}
	remarshal(t, body, &list)
	var ids []string
	for _, e := range list.Evals {
		ids = append(ids, e.ID)
	}
	if !slices.Equal(ids, []string{rescore.ID, v3.ID, sides.ID}) {
		t.Fatalf("the evaluations listed: %v", ids)
	}
	if code, body := f.do(t, "GET", "/v1/evals", "eve-key", ""); code != 200 || len(body["evals"].([]any)) != 0 {
		t.Errorf("another user's viewer lists the evaluations: %d %v", code, body)
	}
	if code, body := f.do(t, "GET", "/v1/evals/"+sides.ID, "eve-key", ""); code != 404 {
		t.Errorf("another user's viewer reads an evaluation: %d %v", code, body)
	}
	first, last := list.Evals[2], list.Evals[0]
	if first.Dataset != "support-triage" || first.Status != store.Completed || first.Summary != "8/10 passed" || first.RescoreOf != "" ||
		len(first.Agents) != 2 || first.Agents[1] != (evalAgentView{Agent: "triage@v2", PassRate: 0.8, Passed: 4, Total: 5}) || first.Trials != 1 {
		t.Errorf("the first evaluation: %+v", first)
	}
	if last.RescoreOf != sides.ID || last.Summary != "8/10 passed" {
		t.Errorf("the rescore: %+v", last)
	}
	if list.Evals[1].Summary != "4/5 passed" || list.Evals[1].Agents[0].Agent != "triage@v3" {
		t.Errorf("v3's: %+v", list.Evals[1])
	}

	_, page := f.do(t, "GET", "/v1/evals?limit=2", "view-key", "")
	if evs := page["evals"].([]any); len(evs) != 2 || page["next_cursor"] != v3.ID {
		t.Errorf("the first page: %v", page)
	}
	_, page = f.do(t, "GET", "/v1/evals?limit=2&cursor="+v3.ID, "view-key", "")
	if evs := page["evals"].([]any); len(evs) != 1 || evs[0].(map[string]any)["id"] != sides.ID || page["next_cursor"] != nil {
		t.Errorf("the second page: %v", page)
	}
	if code, body := f.do(t, "GET", "/v1/evals?limit=0", "view-key", ""); code != 400 {
		t.Errorf("limit=0: %d %v", code, body)
	}
	if code, body := f.do(t, "GET", "/v1/evals", "", ""); code != 401 {
		t.Errorf("no key: %d %v", code, body)
	}

	// The runs: the 15 cases' (the rescore ran none), not the evaluations.
	_, runs := f.do(t, "GET", "/v1/runs", "view-key", "")
	rs := runs["runs"].([]any)
	parents := map[string]int{}
	for _, r := range rs {
		r := r.(map[string]any)
		if r["kind"] == evaluation.Kind {
			t.Errorf("an evaluation in the runs: %v", r)
		}
		parents[r["parent_run_id"].(string)]++
		if r["parent_kind"] != "eval" { // the viewer tags it a case, not a stage
			t.Errorf("a case run's parent_kind %v", r["parent_kind"])
		}
	}
	if len(rs) != 15 || parents[sides.ID] != 10 || parents[v3.ID] != 5 {
		t.Errorf("%d runs, by parent %v", len(rs), parents)
	}
	// The evaluation is still a run by its id, without its report.
	code, run := f.do(t, "GET", "/v1/runs/"+sides.ID, "view-key", "")
	if code != 200 || run["kind"] != "eval" || run["status"] != "completed" || run["result"] != nil || run["outcome"] != "8/10 passed" {
		t.Errorf("the evaluation as a run: %d %v", code, run)
	}
}

// TestEvalReport: GET /v1/evals/{id} answers the stored report, the
// comparison of its two agents in it; an id that is not an evaluation
// is 404, one with no report 409.
func TestEvalReport(t *testing.T) {
	f := newFixture(t, Config{})
	sides, _, _ := storedEvals(t, f.st)
	code, body := f.do(t, "GET", "/v1/evals/"+sides.ID, "", "")
	if code != 200 {
		t.Fatalf("%d %v", code, body)
	}
	var rep evaluation.Report
	remarshal(t, body, &rep)
	want, _ := json.Marshal(sides)
	got, _ := json.Marshal(rep)
	if string(got) != string(want) {
		t.Errorf("the report served:\n%s\nwant\n%s", got, want)
	}
	c := rep.Comparison
	if c == nil || c.From != "triage@v1" || c.To != "triage@v2" || !slices.Equal(c.Fixes, []string{"crash#1"}) || !slices.Equal(c.Regressions, []string{"password#1"}) {
		t.Errorf("the comparison of v2 with v1: %+v", c)
	}
	v1 := rep.Agents[0]
	// v1: refund and invoice take two calls, the others one: 7 calls of 50
	// tokens, 7 turns over 5 tasks, two lookups.
	if v1.Passed != 4 || v1.TokenUsage != 350 || v1.StepsPerTask != 7.0/5 || v1.ToolCalls != 2 || v1.ToolLatencyMS["lookup_order"].Calls != 2 ||
		v1.CostUSD == nil || *v1.CostUSD != 7*(40*2.5+10*10)/1e6 || v1.Tags["billing"] != (evaluation.TagScore{Passed: 2, Total: 2}) {
		t.Errorf("v1's figures: %+v", v1)
	}
	crash := v1.Cases[1]
	if crash.Case != "crash" || crash.Passed || crash.RunID == "" || crash.Checks[1].Passed || crash.Checks[1].Reason == "" {
		t.Errorf("v1's crash: %+v", crash)
	}
	if code, run := f.do(t, "GET", "/v1/runs/"+crash.RunID, "", ""); code != 200 || run["parent_run_id"] != sides.ID {
		t.Errorf("the case's run: %d %v", code, run)
	}

	for _, id := range []string{"eval_nope", crash.RunID} {
		if code, body := f.do(t, "GET", "/v1/evals/"+id, "", ""); code != 404 || !strings.Contains(fmt.Sprint(body), "no evaluation") {
			t.Errorf("%s: %d %v", id, code, body)
		}
	}
	// An evaluation whose process died before its report (its lease ran
	// out): listed, with no agents; its report is a conflict.
	now := time.Now().UTC()
	if err := f.st.Create(context.Background(), store.Run{ID: "eval_died", Kind: evaluation.Kind, Name: "support-triage", Status: store.Running,
		Holder: "gone", LeaseUntil: now.Add(-time.Minute), CreatedAt: now, UpdatedAt: now}); err != nil {
		t.Fatal(err)
	}
	if code, body := f.do(t, "GET", "/v1/evals/eval_died", "", ""); code != 409 || !strings.Contains(fmt.Sprint(body), "interrupted") {
		t.Errorf("an evaluation without a report: %d %v", code, body)
	}
	_, list := f.do(t, "GET", "/v1/evals?limit=1", "", "")
	if e := list["evals"].([]any)[0].(map[string]any); e["id"] != "eval_died" || e["status"] != "interrupted" || len(e["agents"].([]any)) != 0 {
		t.Errorf("the interrupted evaluation listed: %v", e)
	}
}

// TestEvalCompare: GET /v1/evals/{id}/compare/{baseline} compares an
// agent of one evaluation with one of another: by default the agent of
// the same name, else the first; ?baseline_agent= picks another.
func TestEvalCompare(t *testing.T) {
	f := newFixture(t, Config{})
	sides, v3, rescore := storedEvals(t, f.st)
	for _, tc := range []struct {
		path, from, to string
		regressions    []string
		fixes          []string
		passDelta      float64
	}{
		{"/v1/evals/" + v3.ID + "/compare/" + sides.ID, "triage@v1", "triage@v3", []string{"invoice#1"}, []string{"crash#1"}, 0},
		{"/v1/evals/" + v3.ID + "/compare/" + sides.ID + "?baseline_agent=triage@v2", "triage@v2", "triage@v3", []string{"invoice#1"}, []string{"password#1"}, 0},
		{"/v1/evals/" + rescore.ID + "/compare/" + sides.ID + "?agent=triage@v2", "triage@v2", "triage@v2", []string{}, []string{}, 0},
		{"/v1/evals/" + sides.ID + "/compare/" + v3.ID + "?agent=triage@v2", "triage@v3", "triage@v2", []string{"password#1"}, []string{"invoice#1"}, 0},
	} {
		code, body := f.do(t, "GET", tc.path, "", "")
		if code != 200 {
			t.Errorf("%s: %d %v", tc.path, code, body)
			continue
		}
		var rep evaluation.Report
		remarshal(t, body, &rep)
		c := rep.Baseline
		if c == nil || c.From != tc.from || c.To != tc.to || c.Baseline == "" || !slices.Equal(c.Regressions, tc.regressions) ||
			!slices.Equal(c.Fixes, tc.fixes) || c.PassRateDelta != tc.passDelta {
			t.Errorf("%s: %+v", tc.path, c)
		}
		if len(rep.Agents) == 0 || rep.ID == c.Baseline {
			t.Errorf("%s: the report is not the compared one's: %+v", tc.path, rep)
		}
		if (len(rep.Agents) == 2) != (rep.Comparison != nil) {
			t.Errorf("%s: the comparison of the report's own agents: %+v", tc.path, rep.Comparison)
		}
	}
	for path, want := range map[string]int{
		"/v1/evals/" + v3.ID + "/compare/eval_nope":                           404,
		"/v1/evals/eval_nope/compare/" + v3.ID:                                404,
		"/v1/evals/" + v3.ID + "/compare/" + sides.ID + "?agent=triage@v9":    400,
		"/v1/evals/" + v3.ID + "/compare/" + sides.ID + "?baseline_agent=nah": 400,
	} {
		if code, body := f.do(t, "GET", path, "", ""); code != want {
			t.Errorf("%s: %d %v, want %d", path, code, body, want)
		}
	}
}

// remarshal decodes what f.do decoded into v.
func remarshal(t *testing.T, from any, v any) {
	t.Helper()
	data, err := json.Marshal(from)
	if err == nil {
		err = json.Unmarshal(data, v)
	}
	if err != nil {
		t.Fatal(err)
	}
}

// TestViewerEvalFiles: the evaluation pages' scripts are served as the
// others are (JavaScript, under the page's policy), the page links to
// the evaluations, and no script of the page builds HTML from text or
// names another origin: what a report holds (a case's name, a check's
// reason, the model's output in it) is only ever text.
func TestViewerEvalFiles(t *testing.T) {
	f, _ := newViewerFixture(t, nil)
	_, page := get(t, f.http.URL+"/", nil)
	if !strings.Contains(page, `href="#/evals"`) {
		t.Error("the page has no link to the evaluations")
	}
	for _, name := range []string{"evals.js", "evalcompare.js"} {
		resp, js := get(t, f.http.URL+"/viewer/"+name, nil)
		if resp.StatusCode != 200 || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/javascript") ||
			!strings.Contains(resp.Header.Get("Content-Security-Policy"), "script-src 'self'") || !strings.Contains(js, "export function mount") {
			t.Errorf("%s: %d %v", name, resp.StatusCode, resp.Header)
		}
	}
	entries, err := viewerFiles.ReadDir("viewer")
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if !strings.HasSuffix(e.Name(), ".js") {
			continue
		}
		data, _ := viewerFiles.ReadFile("viewer/" + e.Name())
		for _, bad := range []string{"innerHTML", "outerHTML =", "insertAdjacentHTML", "document.write", "http://", "https://", "eval("} {
			if strings.Contains(string(data), bad) {
				t.Errorf("%s has %q", e.Name(), bad)
			}
		}
	}
}
