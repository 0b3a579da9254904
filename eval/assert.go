package eval

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"sync"

	"github.com/agentry/agentry/agent"
	"github.com/agentry/agentry/schema"
	"github.com/agentry/agentry/store"
)

// Check is one assertion's verdict on a run.
type Check struct {
	Type   string `json:"type"`
	Passed bool   `json:"passed"`
	// Reason says why it failed, or what a judge thought.
	Reason string `json:"reason,omitempty"`
	// Score is a judge's, 0..1; JudgeRun the judge's run; Judge and
	// Rubric what judged and against what (a rescore reuses the verdict).
	Score    *float64 `json:"score,omitempty"`
	JudgeRun string   `json:"judge_run,omitempty"`
	Judge    string   `json:"judge,omitempty"`
	Rubric   string   `json:"rubric,omitempty"`
	// Turn is the turn of a conversation case the check is of (from 1).
	Turn int `json:"turn,omitempty"`
}

// Judge scores an output against a rubric: it runs the judge agent ref
// on the input keys input, output, expected and rubric, and returns its
// score (0..1), its reason and its run's id. judged is the run whose
// output it scores: the judge's run belongs to it.
type Judge func(ctx context.Context, ref, judged string, input map[string]any) (score float64, reason, runID string, err error)

// AgentJudge is a Judge that runs judge agents: find returns the agent a
// reference names and the options of its run (a fresh scripted model,
// say). Each verdict is a run stored in st, a child of the run it judged;
// the judge must answer {"score": 0..1, "reason": "…"}.
func AgentJudge(st store.Store, find func(ref string) (*agent.Agent, []agent.RunOption, error)) Judge {
	return func(ctx context.Context, ref, judged string, input map[string]any) (float64, string, string, error) {
		j, opts, err := find(ref)
		if err != nil {
			return 0, "", "", err
		}
		opts = append([]agent.RunOption{agent.WithStore(st), agent.WithParentRunID(judged),
			agent.WithMetadata(map[string]string{"eval_judge": ref})}, opts...)
		res, err := j.Run(ctx, input, opts...)
		if err != nil {
			id := ""
			if res != nil {
				id = res.ID
			}
			return 0, "", id, err
		}
		var v struct {
			Score  *float64 `json:"score"`
			Reason string   `json:"reason"`
		}
		b, _ := json.Marshal(res.Result)
		if json.Unmarshal(b, &v) != nil || v.Score == nil || *v.Score < 0 || *v.Score > 1 {
			return 0, "", res.ID, fmt.Errorf("the judge answered %s: want {\"score\": 0..1, \"reason\": \"…\"}", b)
		}
		return *v.Score, v.Reason, res.ID, nil
	}
}

// verdicts are the judges' verdicts an evaluation had, by what they
// judged: a rescore with the same judge, rubric and output reuses them.
// Safe for concurrent use.
type verdicts struct {
	mu sync.Mutex
	m  map[string]Check
}

func (v *verdicts) get(key string) (Check, bool) {
	if v == nil {
		return Check{}, false
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	c, ok := v.m[key]
	return c, ok
}

func (v *verdicts) put(key string, c Check) {
	if v == nil {
		return
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.m == nil {
		v.m = map[string]Check{}
	}
	v.m[key] = c
}

// verdictKey names what a judge judged: its rubric, the case (its name
// and expected output, which the judge sees) and the output.
func verdictKey(a Assertion, c *Case, output string) string {
	return strings.Join([]string{a.Agent, a.Rubric, c.Name, string(c.Expected), output}, "\x00")
}

// Assertions are what a case's runs are checked with: the dataset's
// assertions, then the case's.
func (d *Dataset) Assertions(c *Case) []Assertion {
	return append(append([]Assertion{}, d.Assert...), c.Assert...)
}

// score checks every assertion of the dataset and of the case on res. A
// run that failed fails its case (a "run" check), unless the case says
// how it should end (an outcome or terminate_reason assertion); judges
// are not asked about a failed run's output.
func score(ctx context.Context, d *Dataset, c *Case, res *agent.Result, judge Judge, known *verdicts) []Check {
	all := d.Assertions(c)
	out := make([]Check, 0, len(all)+1)
	failed := res.Error != nil && res.TerminateReason != agent.ReasonCompleted || res.Outcome == agent.OutcomeError
	if failed && !slices.ContainsFunc(all, func(a Assertion) bool { return a.Type == "outcome" || a.Type == "terminate_reason" }) {
		why := "the run did not succeed"
		if res.Error != nil {
			why = "the run failed: " + res.Error.Code + ": " + res.Error.Message
		}
		out = append(out, Check{Type: "run", Reason: why})
	}
	for _, a := range all {
		if a.Type == "judge" && failed {
			out = append(out, Check{Type: "judge", Judge: a.Agent, Rubric: a.Rubric, Reason: "not judged: the run failed"})
			continue
		}
		out = append(out, checkOne(ctx, a, c, res, judge, known))
	}
	return out
}

func checkOne(ctx context.Context, a Assertion, c *Case, res *agent.Result, judge Judge, known *verdicts) Check {
	switch a.Type {
	case "tool_called", "tool_not_called", "outcome", "terminate_reason":
		return checkRun(Check{Type: a.Type}, a, res)
	case "max_steps", "max_cost_usd", "max_latency_ms":
		return limit(Check{Type: a.Type}, a, res)
	}
	out, err := field(res.Result, a.Field)
	if err != nil {
		return Check{Type: a.Type, Reason: err.Error()}
	}
	if a.Type == "judge" {
		return judged(ctx, a, c, res, out, judge, known)
	}
	return checkOutput(Check{Type: a.Type}, a, c, out)
}

// checkOutput checks an assertion on the output (or its field).
func checkOutput(ck Check, a Assertion, c *Case, out any) Check {
	fail := func(format string, args ...any) Check {
		ck.Reason = fmt.Sprintf(format, args...)
		return ck
	}
	switch a.Type {
	case "equals", "equals_subset":
		want := c.Expected
		if len(a.Value) > 0 {
			want = a.Value
		}
		var exp any
		_ = json.Unmarshal(want, &exp)
		if a.Field != "" && len(a.Value) == 0 {
			var err error
			if exp, err = field(exp, a.Field); err != nil {
				return fail("expected: %v", err)
			}
		}
		match := reflect.DeepEqual(normal(out), normal(exp))
		if a.Type == "equals_subset" {
			match = subset(normal(exp), normal(out))
		}
		if !match {
			return fail("the output %s does not match %s", brief(out), brief(exp))
		}
	case "contains", "not_contains":
		s, _ := a.text()
		has := strings.Contains(textOf(out), s)
		if has != (a.Type == "contains") {
			return fail("the output %s %q", map[bool]string{true: "contains", false: "does not contain"}[has], s)
		}
	case "regex":
		s, _ := a.text()
		if !regexp.MustCompile(s).MatchString(textOf(out)) {
			return fail("the output does not match /%s/", s)
		}
	case "json_schema":
		sc, _ := schema.Compile(a.Value)
		b, _ := json.Marshal(out)
		if err := sc.ValidateJSON(b); err != nil {
			return fail("the output is not valid: %v", err)
		}
	case "enum":
		var allowed []any
		_ = json.Unmarshal(a.Value, &allowed)
		found := false
		for _, v := range allowed {
			found = found || reflect.DeepEqual(normal(v), normal(out))
		}
		if !found {
			return fail("the output %s is not one of %s", brief(out), brief(allowed))
		}
	}
	ck.Passed = true
	return ck
}

// checkRun checks an assertion on what the run did and how it ended.
func checkRun(ck Check, a Assertion, res *agent.Result) Check {
	fail := func(format string, args ...any) Check {
		ck.Reason = fmt.Sprintf(format, args...)
		return ck
	}
	switch a.Type {
	case "tool_called", "tool_not_called":
		n := callsOf(res, a)
		if a.Type == "tool_called" && n == 0 {
			return fail("%s was not called%s", a.Tool, argsNote(a))
		}
		if a.Type == "tool_not_called" && n > 0 {
			return fail("%s was called%s (%d times)", a.Tool, argsNote(a), n)
		}
	case "outcome", "terminate_reason":
		want, _ := a.text()
		got := string(res.Outcome)
		if a.Type == "terminate_reason" {
			got = string(res.TerminateReason)
		}
		if got != want {
			return fail("the %s is %s, not %s", strings.ReplaceAll(a.Type, "_", " "), got, want)
		}
	}
	ck.Passed = true
	return ck
}

// limit checks a max_ assertion: steps are the Result's iterations,
// latency its duration; an unknown cost fails.
func limit(ck Check, a Assertion, res *agent.Result) Check {
	max, _ := a.number()
	var got float64
	switch a.Type {
	case "max_steps":
		got = float64(res.Iterations)
	case "max_latency_ms":
		got = res.Metrics.DurationMS
	case "max_cost_usd":
		if res.EstimatedCost == nil {
			ck.Reason = "the cost is unknown (a model of the run has no price)"
			return ck
		}
		got = *res.EstimatedCost
	}
	if got > max {
		ck.Reason = fmt.Sprintf("%s %v is over %v", strings.TrimPrefix(a.Type, "max_"), got, max)
		return ck
	}
	ck.Passed = true
	return ck
}

// judged asks the judge, unless a verdict on the same output is known.
func judged(ctx context.Context, a Assertion, c *Case, res *agent.Result, out any, judge Judge, known *verdicts) Check {
	text := textOf(out)
	key := verdictKey(a, c, text)
	ck, ok := known.get(key)
	if !ok {
		if judge == nil {
			return Check{Type: "judge", Judge: a.Agent, Rubric: a.Rubric, Reason: "no judge to ask (and no stored verdict on this output)"}
		}
		var exp any
		_ = json.Unmarshal(c.Expected, &exp)
		input, _ := json.Marshal(c.Input)
		score, reason, runID, err := judge(ctx, a.Agent, res.ID, map[string]any{"input": string(input), "output": text,
			"expected": textOf(exp), "rubric": a.Rubric})
		if err != nil {
			return Check{Type: "judge", Judge: a.Agent, Rubric: a.Rubric, Reason: fmt.Sprintf("judge %s: %v", a.Agent, err), JudgeRun: runID}
		}
		ck = Check{Type: "judge", Judge: a.Agent, Rubric: a.Rubric, Score: &score, Reason: reason, JudgeRun: runID}
		known.put(key, ck)
	}
	min := 0.5
	if a.MinScore != nil {
		min = *a.MinScore
	}
	ck.Passed = ck.Score != nil && *ck.Score >= min
	return ck
}

// callsOf counts the run's calls of a's tool whose arguments hold a's.
func callsOf(res *agent.Result, a Assertion) int {
	var want any
	_ = json.Unmarshal(a.Args, &want)
	n := 0
	for _, s := range res.Steps {
		if s.Action == nil || s.Action.Tool != a.Tool {
			continue
		}
		var got any
		_ = json.Unmarshal(s.Action.Input, &got)
		if want == nil || subset(normal(want), normal(got)) {
			n++
		}
	}
	return n
}

func argsNote(a Assertion) string {
	if len(a.Args) == 0 {
		return ""
	}
	var b bytes.Buffer
	if json.Compact(&b, a.Args) != nil {
		return " with arguments " + string(a.Args)
	}
	return " with arguments " + b.String()
}

// field is the value at a dotted path into v ("" is v).
func field(v any, path string) (any, error) {
	if path == "" {
		return v, nil
	}
	for _, key := range strings.Split(path, ".") {
		m, ok := normal(v).(map[string]any)
		if !ok {
			return nil, fmt.Errorf("the output has no field %q (it is not an object there)", path)
		}
		if v, ok = m[key]; !ok {
			return nil, fmt.Errorf("the output has no field %q", path)
		}
	}
	return v, nil
}

// normal is v as encoding/json decodes JSON: maps, slices, float64.
func normal(v any) any {
	switch v.(type) {
	case nil, string, bool, float64, map[string]any, []any:
		return v
	}
	b, err := json.Marshal(v)
	if err != nil {
		return v
	}
	var out any
	if json.Unmarshal(b, &out) != nil {
		return v
	}
	return out
}

// subset reports whether every field of want (recursively) is in got.
func subset(want, got any) bool {
	wm, ok := want.(map[string]any)
	if !ok {
		return reflect.DeepEqual(want, got)
	}
	gm, ok := got.(map[string]any)
	if !ok {
		return false
	}
	for k, wv := range wm {
		gv, ok := gm[k]
		if !ok || !subset(wv, gv) {
			return false
		}
	}
	return true
}

// textOf is the output as text: a string as it is, anything else as JSON.
func textOf(v any) string {
	if s, ok := v.(string); ok {
		return s
	}
	b, _ := json.Marshal(v)
	return string(b)
}

// brief is v as JSON, cut to 120 characters.
func brief(v any) string {
	s := textOf(v)
	if _, ok := v.(string); ok {
		b, _ := json.Marshal(s)
		s = string(b)
	}
	if r := []rune(s); len(r) > 120 {
		s = string(r[:117]) + "..."
	}
	return s
}
