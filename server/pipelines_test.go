package server

import (
	"context"
	"fmt"
	"testing"

	"github.com/agentry/agentry/pipeline"
)

// triage is a pipeline of two stages whose Go hooks do the work: the
// first routes an urgent task to the second.
func triage(t *testing.T) *pipeline.Pipeline {
	t.Helper()
	d, err := pipeline.Parse("triage", []byte(`{"pipeline_name": "triage", "version": "v1", "stages": [
		{"name": "classify", "agent": {"agent_name": "classify", "version": "v1", "mode": "service"},
		 "routing_rules": [{"condition": "urgent", "value": true, "target": "escalate"}], "default_next": "end"},
		{"name": "escalate", "agent": {"agent_name": "escalate", "version": "v1", "mode": "service"}}]}`))
	if err != nil {
		t.Fatal(err)
	}
	work := func(out map[string]any) pipeline.Hooks {
		return pipeline.Hooks{Work: func(context.Context, *pipeline.Envelope) (map[string]any, error) { return out, nil }}
	}
	p, err := pipeline.New(d, ".", pipeline.WithHooks("classify", work(map[string]any{"urgent": true})),
		pipeline.WithHooks("escalate", work(map[string]any{"ticket": "T-1"})))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	return p
}

// TestPipelineRuns: a served pipeline runs over HTTP as an agent does:
// waited for or not, stored, listed with its stages, its events
// streamed; a name that is not served is a 404, two targets a 400.
func TestPipelineRuns(t *testing.T) {
	f := newFixture(t, Config{Pipelines: []*pipeline.Pipeline{triage(t)}})
	code, res := f.do(t, "POST", "/v1/runs?wait=true", "", `{"pipeline": "triage", "input": {"task": "the site is down"}}`)
	if code != 200 || res["success"] != true {
		t.Fatalf("%d %v", code, res)
	}
	env, _ := res["envelope"].(map[string]any)
	if hist, _ := env["history"].([]any); len(hist) != 2 {
		t.Errorf("the path taken: %v", env["history"])
	}
	id := res["id"].(string)
	if code, run := f.do(t, "GET", "/v1/runs/"+id, "", ""); code != 200 || run["kind"] != "pipeline" || run["status"] != "completed" {
		t.Errorf("the stored run: %d %v", code, run)
	}
	events := f.stream(t, id, 0)
	if len(events) < 2 || events[0].typ != "run_start" || events[len(events)-1].typ != "run_end" {
		t.Errorf("the pipeline's events: %v", events)
	}
	// Not waited for: the id at once, the run found at once.
	code, started := f.do(t, "POST", "/v1/runs", "", `{"pipeline": "triage@v1", "input": {"task": "t"}}`)
	if code != 201 {
		t.Fatalf("%d %v", code, started)
	}
	if code, run := f.do(t, "GET", "/v1/runs/"+started["run_id"].(string), "", ""); code != 200 {
		t.Errorf("the run just started: %d %v", code, run)
	}
	_, list := f.do(t, "GET", "/v1/agents", "", "")
	if ps, _ := list["pipelines"].([]any); len(ps) != 1 || ps[0].(map[string]any)["name"] != "triage" {
		t.Errorf("pipelines listed: %v", list["pipelines"])
	}
	for _, tc := range []struct {
		name, body string
		status     int
	}{
		{"not served", `{"pipeline": "nope"}`, 404},
		{"another version", `{"pipeline": "triage@v9"}`, 404},
		{"a pipeline and an agent", `{"pipeline": "triage", "agent": "greeter"}`, 400},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if code, body := f.do(t, "POST", "/v1/runs", "", tc.body); code != tc.status {
				t.Errorf("%d %v", code, body)
			}
		})
	}
}

// TestPipelineAnswer: a served pipeline that asks its user pauses; the
// answer given over HTTP reaches the stage that asked, and the run goes
// on as the same run to its end. What the client names is checked
// against what the store says waits.
func TestPipelineAnswer(t *testing.T) {
	d, err := pipeline.Parse("ask", []byte(`{"pipeline_name": "ask", "version": "v1", "stages": [
		{"name": "where", "agent": {"agent_name": "where", "version": "v1", "mode": "service"}}]}`))
	if err != nil {
		t.Fatal(err)
	}
	p, err := pipeline.New(d, ".", pipeline.WithHooks("where", pipeline.Hooks{Work: func(_ context.Context, env *pipeline.Envelope) (map[string]any, error) {
		if ans, ok := env.Metadata["user_response"]; ok {
			return map[string]any{"env": ans}, nil
		}
		return map[string]any{"outcome": "clarify", "question": "Which environment?"}, nil
	}}))
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	f := newFixture(t, Config{Pipelines: []*pipeline.Pipeline{p}})
	code, res := f.do(t, "POST", "/v1/runs?wait=true", "", `{"pipeline": "ask"}`)
	if code != 200 || res["terminate_reason"] != "awaiting_approval" {
		t.Fatalf("%d %v", code, res)
	}
	id := res["id"].(string)
	for _, tc := range []struct {
		name, body string
		status     int
	}{
		{"no answer", `{}`, 400},
		{"a confirm of a question", `{"approve": ["where"]}`, 400},
		{"an answer and a decision", `{"answer": "x", "deny": ["where"]}`, 400},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if code, body := f.do(t, "POST", "/v1/runs/"+id+"/resume", "", tc.body); code != tc.status {
				t.Errorf("%d %v", code, body)
			}
		})
	}
	code, res = f.do(t, "POST", "/v1/runs/"+id+"/resume?wait=true", "", `{"answer": "staging"}`)
	if code != 200 || res["success"] != true || res["id"] != id {
		t.Fatalf("resumed: %d %v", code, res)
	}
	if out := res["envelope"].(map[string]any)["outputs"].(map[string]any); fmt.Sprint(out) != "map[where:map[env:staging]]" {
		t.Errorf("the stage's output: %v", out)
	}
	if code, body := f.do(t, "POST", "/v1/runs/"+id+"/resume", "", `{"answer": "again"}`); code != 409 {
		t.Errorf("a finished pipeline resumed: %d %v", code, body)
	}
	// An agent's run takes no answer.
	_, ar := f.do(t, "POST", "/v1/runs?wait=true", "", `{"agent": "greeter"}`)
	if code, body := f.do(t, "POST", "/v1/runs/"+ar["id"].(string)+"/resume", "", `{"answer": "x"}`); code != 400 {
		t.Errorf("an answer to an agent's run: %d %v", code, body)
	}
}
