package main

import (
	"encoding/json"
	"encoding/xml"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

const evalDir = "../../examples/evals"

// evalJSON runs agentry eval with args and --json, and decodes the report.
func evalJSON(t *testing.T, wantCode int, args ...string) map[string]any {
	t.Helper()
	args = append(args, "--json")
	if args[0] != "rescore" { // it shows no progress
		args = append(args, "-q")
	}
	code, out, errs := runCLI(t, append([]string{"eval"}, args...)...)
	if code != wantCode {
		t.Fatalf("exit %d, want %d\n%s", code, wantCode, errs)
	}
	var rep map[string]any
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	return rep
}

func agentsOf(rep map[string]any) []map[string]any {
	var out []map[string]any
	for _, a := range rep["agents"].([]any) {
		out = append(out, a.(map[string]any))
	}
	return out
}

// Through the binary: two versions of the example agent on the example
// dataset, the report's numbers checked exactly (the scripts' tokens
// and the spec's prices), the comparison, JUnit, the gates' exit codes,
// the stored evaluation listed and shown, and a rescore that calls no
// model.
func TestEvalThroughTheBinary(t *testing.T) {
	dir := t.TempDir()
	db := filepath.Join(dir, "runs.db")
	junit := filepath.Join(dir, "eval.xml")
	rep := evalJSON(t, 0, filepath.Join(evalDir, "triage.json"), "--agents", filepath.Join(evalDir, "agents"),
		"--agent", "triage@v1", "--agent", "triage@v2", "--db", db, "--junit", junit, "--concurrency", "3")
	a := agentsOf(rep)
	// v1: each run two model calls (120+20, then 160+10 tokens) and one
	// kv_set; v2: one call of 100+10.
	for _, tc := range []struct {
		i                     int
		passed, tokens, calls float64
		steps, cost           float64
	}{{0, 2, 930, 3, 2, 3 * (120*0.4 + 20*1.6 + 160*0.4 + 10*1.6) / 1e6}, {1, 1, 330, 0, 1, 3 * (100*0.4 + 10*1.6) / 1e6}} {
		got := a[tc.i]
		if got["passed"] != tc.passed || got["total"] != 3.0 || got["token_usage"] != tc.tokens || got["tool_calls"] != tc.calls ||
			got["steps_per_task"] != tc.steps || got["tool_error_rate"] != 0.0 || !near(got["cost_usd"].(float64), tc.cost) {
			t.Errorf("%s: %v", got["agent"], got)
		}
	}
	if a[0]["agent"] != "triage@v1" || a[0]["pass_rate"] != 2.0/3 {
		t.Errorf("v1 %v", a[0])
	}
	judged := a[0]["cases"].([]any)[2].(map[string]any)["checks"].([]any)[3].(map[string]any)
	if judged["type"] != "judge" || judged["score"] != 0.8 || judged["reason"] != "Routed with care." || judged["passed"] != true {
		t.Errorf("the judge's check %v", judged)
	}
	c := rep["comparison"].(map[string]any)
	if join(c["regressions"]) != "refund#1,double-charge#1" || join(c["fixes"]) != "crash#1" || c["token_usage_delta"] != -600.0 {
		t.Errorf("comparison %v", c)
	}
	checkJUnit(t, junit)
	id := rep["id"].(string)

	// Gates: under --fail-under, and a regression past --max-regression.
	v1 := evalJSON(t, 1, filepath.Join(evalDir, "triage.json"), "--agents", filepath.Join(evalDir, "agents"), "--agent", "triage@v1", "--db", db, "--fail-under", "0.9")
	evalJSON(t, 0, filepath.Join(evalDir, "triage.json"), "--agents", filepath.Join(evalDir, "agents"), "--agent", "triage@v1", "--db", db, "--fail-under", "0.6")
	// v2 against the evaluation of v1 alone: two regressions.
	base := evalJSON(t, 1, filepath.Join(evalDir, "triage.json"), "--agents", filepath.Join(evalDir, "agents"), "--agent", "triage@v2",
		"--db", db, "--baseline", v1["id"].(string), "--max-regression", "1")
	if bc := base["baseline"].(map[string]any); bc["baseline"] != v1["id"] || bc["from"] != "triage@v1" || join(bc["regressions"]) != "refund#1,double-charge#1" {
		t.Errorf("against the baseline %v", bc)
	}
	evalJSON(t, 0, filepath.Join(evalDir, "triage.json"), "--agents", filepath.Join(evalDir, "agents"), "--agent", "triage@v2",
		"--db", db, "--baseline", v1["id"].(string), "--max-regression", "2")
	// Against the first evaluation, which had v2 too: v2 is compared with v2.
	same := evalJSON(t, 0, filepath.Join(evalDir, "triage.json"), "--agents", filepath.Join(evalDir, "agents"), "--agent", "triage@v2",
		"--db", db, "--baseline", id, "--max-regression", "0")
	if bc := same["baseline"].(map[string]any); bc["from"] != "triage@v2" || len(bc["regressions"].([]any)) != 0 {
		t.Errorf("against v2 in the baseline %v", bc)
	}

	// Trials, and another model for the same agent, side by side.
	tr := evalJSON(t, 0, filepath.Join(evalDir, "triage.json"), "--agents", filepath.Join(evalDir, "agents"), "--agent", "triage@v1",
		"--model", "scripted:"+filepath.Join(evalDir, "scripts", "triage-v1.json"), "--model", "scripted:"+filepath.Join(evalDir, "scripts", "triage-v2.json"),
		"--trials", "2", "--db", db)
	ta := agentsOf(tr)
	if len(ta) != 2 || ta[0]["total"] != 6.0 || ta[0]["passed"] != 4.0 || ta[0]["pass_at_k"] != 2.0/3 || ta[1]["passed"] != 2.0 ||
		!strings.HasSuffix(ta[1]["agent"].(string), "triage-v2.json") || !strings.HasPrefix(ta[1]["agent"].(string), "triage@v1 on scripted:") {
		t.Errorf("trials and models: %v", ta)
	}

	// The case runs are the evaluation's.
	if code, out, _ := runCLI(t, "runs", "--db", db, "--parent", id); code != 0 || strings.Count(out, "triage") != 6 {
		t.Errorf("the evaluation's runs: %d\n%s", code, out)
	}
	// Stored: listed and shown.
	code, out, _ := runCLI(t, "eval", "list", "--db", db)
	if code != 0 || !strings.Contains(out, id) || !strings.Contains(out, "3/6 passed") {
		t.Errorf("eval list: %d\n%s", code, out)
	}
	code, out, _ = runCLI(t, "eval", "show", id, "--db", db)
	if code != 0 || !strings.Contains(out, "regressions (passed, now fail): refund#1, double-charge#1") {
		t.Errorf("eval show: %d\n%s", code, out)
	}

	// A rescore with the crash case asking only for a known queue: the
	// judge's verdicts are reused and no model is called (no run is
	// added to the store).
	changed := filepath.Join(dir, "triage.json")
	data, _ := os.ReadFile(filepath.Join(evalDir, "triage.json"))
	os.WriteFile(changed, []byte(strings.Replace(string(data), `"expected": {"queue": "tech"}, "tags": ["tech"],
   "assert": [{"type": "equals_subset"}]`, `"expected": {"queue": "tech"}, "tags": ["tech"],
   "assert": [{"type": "enum", "field": "queue", "value": ["billing", "tech", "sales"]}]`, 1)), 0o600)
	before := countRuns(t, db)
	again := evalJSON(t, 0, "rescore", id, changed, "--db", db, "--agents", filepath.Join(dir, "no-agents"))
	if got := agentsOf(again); got[0]["passed"] != 3.0 || got[1]["passed"] != 1.0 || again["rescore_of"] != id {
		t.Errorf("rescore: %v", again)
	}
	// What the changed assertion changed: v1's crash now passes.
	if bc := again["baseline"].(map[string]any); bc["baseline"] != id || join(bc["fixes"]) != "crash#1" {
		t.Errorf("the rescore against the evaluation it rescored: %v", bc)
	}
	// Without a dataset, the evaluation's own, as stored, scores it again:
	// the same verdicts, no model called.
	own := evalJSON(t, 0, "rescore", id, "--db", db, "--agents", filepath.Join(dir, "no-agents"))
	if got := agentsOf(own); got[0]["passed"] != 2.0 || got[1]["passed"] != 1.0 || own["rescore_of"] != id {
		t.Errorf("a rescore with the stored dataset: %v", own)
	}
	// A rescore with a judge it has no verdicts of needs that judge.
	newJudge := filepath.Join(dir, "judged.json")
	os.WriteFile(newJudge, []byte(strings.Replace(string(data), `"rubric": "The ticket goes where a person would send it."`, `"rubric": "Short."`, 1)), 0o600)
	if code, _, errs := runCLI(t, "eval", "rescore", id, newJudge, "--db", db, "--agents", filepath.Join(dir, "no-agents")); code != 2 ||
		!strings.Contains(errs, `cases[2] "double-charge": assertion 3 (judge): agent judge@v1`) {
		t.Errorf("a rescore without its new judge: %d %s", code, errs)
	}
	if code, _, errs := runCLI(t, "trace", id, "--db", db); code != 2 || !strings.Contains(errs, "is an evaluation: agentry eval show") {
		t.Errorf("trace of an evaluation: %d %s", code, errs)
	}
	if after := countRuns(t, db); after != before { // runs lists runs, not evaluations: none was added
		t.Errorf("the rescore added %d runs", after-before)
	}

	// Found before anything runs: an input the agent does not take, a judge
	// that does not exist, an agent given twice: exit 2, naming them.
	for _, tc := range []struct{ name, dataset, want string }{
		{"input", `{"name": "b", "cases": [{"name": "typo", "input": {"tiket": "x"}}]}`, `cases[0] "typo": input: triage@v1:`},
		{"judge", `{"name": "b", "cases": [{"name": "j", "input": {"ticket": "x"}, "assert": [{"type": "judge", "agent": "judge@v9", "rubric": "r"}]}]}`,
			`cases[0] "j": assertion 0 (judge): agent judge@v9:`},
	} {
		path := filepath.Join(dir, tc.name+".json")
		os.WriteFile(path, []byte(tc.dataset), 0o600)
		code, _, errs := runCLI(t, "eval", path, "--agent", "triage@v1", "--agents", filepath.Join(evalDir, "agents"), "--db", db)
		if code != 2 || !strings.Contains(errs, tc.want) {
			t.Errorf("%s: %d %s", tc.name, code, errs)
		}
	}
	if code, _, errs := runCLI(t, "eval", filepath.Join(evalDir, "triage.json"), "--agent", "triage@v1", "--agent", "triage@v1",
		"--agents", filepath.Join(evalDir, "agents"), "--db", db); code != 2 || !strings.Contains(errs, "triage@v1 is given twice") {
		t.Errorf("an agent twice: %d %s", code, errs)
	}

	// A bad dataset: exit 2, naming the case and the field.
	bad := filepath.Join(dir, "bad.json")
	os.WriteFile(bad, []byte(`{"name": "b", "cases": [{"name": "x", "input": {}, "assert": [{"type": "regex", "value": "("}]}]}`), 0o600)
	code, _, errs := runCLI(t, "eval", bad, "--agent", "triage@v1", "--agents", filepath.Join(evalDir, "agents"), "--db", db)
	if code != 2 || !strings.Contains(errs, `cases[0] "x": assert[0] (regex): value: error parsing regexp`) {
		t.Errorf("a bad dataset: %d %s", code, errs)
	}
}

func near(a, b float64) bool { return a-b < 1e-12 && b-a < 1e-12 }

func join(v any) string {
	var s []string
	for _, x := range v.([]any) {
		s = append(s, x.(string))
	}
	return strings.Join(s, ",")
}

func countRuns(t *testing.T, db string) int {
	t.Helper()
	code, out, errs := runCLI(t, "runs", "--db", db, "--json", "--limit", "1000")
	if code != 0 {
		t.Fatalf("runs: %s", errs)
	}
	var runs []any
	if err := json.Unmarshal([]byte(out), &runs); err != nil {
		var page struct{ Runs []any }
		if json.Unmarshal([]byte(out), &page) != nil {
			t.Fatalf("runs: %s", out)
		}
		runs = page.Runs
	}
	return len(runs)
}

func checkJUnit(t *testing.T, path string) {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var suites struct {
		Suites []struct {
			Name     string `xml:"name,attr"`
			Tests    int    `xml:"tests,attr"`
			Failures int    `xml:"failures,attr"`
			Cases    []struct {
				Name    string `xml:"name,attr"`
				Failure *struct {
					Message string `xml:"message,attr"`
				} `xml:"failure"`
			} `xml:"testcase"`
		} `xml:"testsuite"`
	}
	if err := xml.Unmarshal(data, &suites); err != nil || len(suites.Suites) != 2 {
		t.Fatalf("%v\n%s", err, data)
	}
	s := suites.Suites[0]
	if s.Name != "triage / triage@v1" || s.Tests != 3 || s.Failures != 1 || s.Cases[1].Failure == nil || s.Cases[0].Failure != nil ||
		!strings.HasPrefix(s.Cases[1].Failure.Message, "FAIL equals_subset") {
		t.Errorf("junit %+v", s)
	}
}

// TestEvalConversationThroughTheBinary: a dataset case that is a
// conversation runs through agentry eval turn by turn, each turn a run
// of one conversation; a failed check names its turn and that turn's run.
func TestEvalConversationThroughTheBinary(t *testing.T) {
	dir := t.TempDir()
	spec := chatDir(t, `{"turns": [{"content": "Hello, Ada!"}, {"content": "You are Ada."}]}`)
	data := filepath.Join(dir, "chat.json")
	os.WriteFile(data, []byte(`{"name": "chat", "cases": [
		{"name": "remembers", "conversation": [{"message": "My name is Ada."},
			{"message": "Who am I?", "assert": [{"type": "contains", "value": "Ada"}]}]},
		{"name": "bob", "conversation": [{"message": "My name is Ada."},
			{"message": "Who am I?", "assert": [{"type": "contains", "value": "Bob"}]}]}]}`), 0o600)
	code, out, errs := run(t, "eval", data, "--agent", spec, "--db", filepath.Join(dir, "runs.db"))
	if code != 0 || !strings.Contains(out, "1/2") {
		t.Fatalf("exit %d\n%s%s", code, out, errs)
	}
	if !strings.Contains(out, "bob#1 on chat@v1: turn 2 contains:") {
		t.Errorf("the failed turn is not named:\n%s", out)
	}
}
