package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestPipelineThroughTheBinary(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary")
	}
	code, res, errs := runBinary(t, "run", "../../examples/pipelines/review.json", "--json", "--input", "task=store the release")
	out, _ := res.Result.(map[string]any)
	if code != 0 || !res.Success || out["approved"] != true || res.Iterations != 6 {
		t.Errorf("exit %d %+v\n%s", code, res, errs)
	}
	for _, want := range []string{"▶ pipeline review@v1", "■ stage executor (hop 2)", "■ critic: success", "→ planner", "✓ review: completed after 6 stages"} {
		if !strings.Contains(errs, want) {
			t.Errorf("progress lacks %q", want)
		}
	}
}

func TestPipelineExitCodes(t *testing.T) {
	code, _, errs := run(t, "run", "testdata/pipelines/broken.json")
	if code != 2 || !strings.Contains(errs, `stage a: routing_rules[0]: target "nowhere" does not exist`) {
		t.Errorf("malformed: exit %d\n%s", code, errs)
	}
	code, out, errs := run(t, "run", "testdata/pipelines/misroute.json", "--json", "-q")
	var res struct {
		Success  bool `json:"success"`
		Envelope struct {
			History []struct{ Stage, Error string } `json:"history"`
		} `json:"envelope"`
		Error struct{ Code, Message string } `json:"error"`
	}
	json.Unmarshal([]byte(out), &res)
	// A rule on a field the output lacks does not match: default_next.
	if code != 0 || !res.Success || len(res.Envelope.History) != 2 || res.Envelope.History[1].Stage != "b" {
		t.Errorf("a rule on a missing field: exit %d %+v\n%s", code, res, errs)
	}
	code, _, errs = run(t, "validate", "testdata/pipelines/broken.json", "testdata/pipelines/misroute.json", "../../examples/pipelines/review.json")
	if code != 2 || !strings.Contains(errs, "broken.json") || strings.Contains(errs, "review.json") {
		t.Errorf("validate: exit %d\n%s", code, errs)
	}
}

func TestPipelinePauseAndResume(t *testing.T) {
	code, out, errs := run(t, "run", "testdata/pipelines/ask.json", "--json")
	if code != 3 || !strings.Contains(errs, "⏸ ") || !strings.Contains(errs, "waiting at stage ask: Deploy to staging or production?") {
		t.Fatalf("exit %d\n%s", code, errs)
	}
	paused := filepath.Join(t.TempDir(), "paused.json")
	os.WriteFile(paused, []byte(out), 0o600)
	// A new process replays its script from the start, so the resumed run
	// gets the script of the model's second answer.
	code, out, errs = run(t, "run", "testdata/pipelines/ask.json", "--resume", paused, "--input", "answer=staging", "-q",
		"--model", "scripted:testdata/pipelines/ask-resumed.json", "--json")
	var res struct {
		Success  bool `json:"success"`
		Envelope struct {
			Outputs  map[string]map[string]any `json:"outputs"`
			HopCount int                       `json:"hop_count"`
		} `json:"envelope"`
	}
	json.Unmarshal([]byte(out), &res)
	if code != 0 || !res.Success || res.Envelope.Outputs["answer"]["env"] != "staging" || res.Envelope.HopCount != 3 {
		t.Errorf("resume: exit %d\n%s\n%s", code, out, errs)
	}
	code, _, errs = run(t, "run", quickstart, "--resume", paused)
	if code != 2 || !strings.Contains(errs, "not a pipeline definition") {
		t.Errorf("resume of an agent: exit %d %s", code, errs)
	}
	// A paused envelope edited to wait at a stage the pipeline lacks: an
	// error naming the stage, exit 2 (it crashed the binary once).
	var env map[string]any
	if err := json.Unmarshal(mustRead(t, paused), &env); err != nil {
		t.Fatal(err)
	}
	pending := env["envelope"].(map[string]any)["pending"].(map[string]any)
	pending["stage"] = "ghost"
	edited := filepath.Join(t.TempDir(), "edited.json")
	b, _ := json.Marshal(env)
	os.WriteFile(edited, b, 0o600)
	code, _, errs = run(t, "run", "testdata/pipelines/ask.json", "--resume", edited, "--input", "answer=staging")
	if code != 2 || !strings.Contains(errs, `"ghost"`) || strings.Contains(errs, "panic") {
		t.Errorf("resume at a stage the pipeline lacks: exit %d %s", code, errs)
	}
}

func mustRead(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// A stored pipeline paused for the user goes on with resume --answer, as
// the same run; its stages are runs of their own under it.
func TestStoredPipelineResume(t *testing.T) {
	db := filepath.Join(t.TempDir(), "runs.db")
	code, out, errs := run(t, "run", "testdata/pipelines/ask.json", "--db", db, "--json", "-q")
	if code != 3 || !strings.Contains(out, "Deploy to staging or production?") {
		t.Fatalf("exit %d\n%s\n%s", code, out, errs)
	}
	var paused struct {
		ID string `json:"id"`
	}
	json.Unmarshal([]byte(out), &paused)
	code, out, _ = run(t, "runs", "--db", db, "--json", "--status", "awaiting_approval")
	if code != 0 || !strings.Contains(out, paused.ID) || !strings.Contains(out, `"kind": "pipeline"`) {
		t.Fatalf("runs awaiting approval:\n%s", out)
	}
	code, _, errs = run(t, "resume", paused.ID, "--db", db)
	if code != 2 || !strings.Contains(errs, "--answer") {
		t.Errorf("resume without --answer: exit %d %s", code, errs)
	}
	code, out, errs = run(t, "resume", paused.ID, "--db", db, "--answer", "staging", "-q", "--json",
		"--model", "scripted:testdata/pipelines/ask-resumed.json")
	var res struct {
		ID       string `json:"id"`
		Success  bool   `json:"success"`
		Envelope struct {
			Outputs  map[string]map[string]any `json:"outputs"`
			HopCount int                       `json:"hop_count"`
		} `json:"envelope"`
	}
	json.Unmarshal([]byte(out), &res)
	if code != 0 || !res.Success || res.ID != paused.ID || res.Envelope.Outputs["answer"]["env"] != "staging" || res.Envelope.HopCount != 3 {
		t.Fatalf("resume --answer: exit %d\n%s\n%s", code, out, errs)
	}
	code, out, _ = run(t, "runs", "--db", db, "--json")
	var runs []struct {
		ID       string `json:"run_id"`
		Status   string `json:"status"`
		ParentID string `json:"parent_run_id"`
	}
	json.Unmarshal([]byte(out), &runs)
	stages := 0
	for _, r := range runs {
		switch {
		case r.ID == paused.ID && r.Status != "completed":
			t.Errorf("the pipeline run is %s after the resume, want completed", r.Status)
		case r.ParentID == paused.ID:
			stages++
		}
	}
	if stages < 2 {
		t.Errorf("%d stage runs under the pipeline run, want its stages:\n%s", stages, out)
	}
	code, out, _ = run(t, "trace", paused.ID, "--db", db)
	if code != 0 || !strings.Contains(out, "stage run ") || !strings.Contains(out, "asker@v1") {
		t.Errorf("trace of the pipeline run lists no stage runs:\n%s", out)
	}
	code, out, _ = run(t, "trace", paused.ID, "--db", db, "--json")
	if code != 0 || !strings.Contains(out, `"envelope"`) || !strings.Contains(out, `"agent_completed"`) {
		t.Errorf("trace of the pipeline run:\n%s", out)
	}
}

// A stored pipeline paused at a confirm is decided like a call:
// resume --approve STAGE or --deny STAGE --reason TEXT, audited.
func TestStoredPipelineConfirm(t *testing.T) {
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "p.json"), []byte(`{"pipeline_name": "deploy", "version": "v1",
	 "stages": [
	   {"name": "check", "agent": {"agent_name": "checker", "version": "v1", "mode": "writer", "model_name": "scripted:replies.json",
	      "system_text": "You check a deploy.", "purpose_text": "Check it.", "output_schema": {"type": "object", "properties": {"outcome": {"type": "string"}, "question": {"type": "string"}, "go": {"type": "boolean"}}}},
	    "output_key": "check"},
	   {"name": "ship", "agent": {"agent_name": "ship", "version": "v1", "mode": "service"}}
	 ]}`), 0o600)
	os.WriteFile(filepath.Join(dir, "replies.json"), []byte(`{"turns": [
	  {"content": "{\"outcome\": \"confirm\", \"question\": \"Ship it?\"}"}]}`), 0o600)
	os.WriteFile(filepath.Join(dir, "after.json"), []byte(`{"turns": [{"content": "{\"go\": false}"}]}`), 0o600)
	db := filepath.Join(dir, "runs.db")
	code, out, errs := run(t, "run", filepath.Join(dir, "p.json"), "--db", db, "--json", "-q")
	var paused struct {
		ID string `json:"id"`
	}
	json.Unmarshal([]byte(out), &paused)
	if code != 3 || !strings.Contains(out, "Ship it?") {
		t.Fatalf("run: exit %d\n%s\n%s", code, out, errs)
	}
	if code, _, errs := run(t, "resume", paused.ID, "--db", db, "--approve", "ship"); code != 2 || !strings.Contains(errs, "waits at stage check (confirm)") {
		t.Errorf("deciding the wrong stage: exit %d %s", code, errs)
	}
	code, out, errs = run(t, "resume", paused.ID, "--db", db, "--deny", "check", "--reason", "not on a Friday", "--json", "-q",
		"--model", "scripted:"+filepath.Join(dir, "after.json"))
	if code != 0 {
		t.Fatalf("resume --deny: exit %d\n%s\n%s", code, out, errs)
	}
	code, out, _ = run(t, "audit", "--db", db, "--json")
	if code != 0 || !strings.Contains(out, `"rule": "pipeline.confirm"`) || !strings.Contains(out, `"decision": "deny"`) || !strings.Contains(out, "not on a Friday") {
		t.Errorf("audit:\n%s", out)
	}
}

// TestModelRoles: a stage names a role, the pipeline's model_roles map
// roles to models, and one change swaps the model of every stage of the
// role: in the definition, or by --model-role. A role without a model,
// and --model-role for an agent, are refused before anything runs.
func TestModelRoles(t *testing.T) {
	dir := t.TempDir()
	for name, says := range map[string]string{"careful.json": "Careful plan.", "quick.json": "Quick plan.", "writer.json": "Written."} {
		os.WriteFile(filepath.Join(dir, name), []byte(`{"model": "gpt-4.1-mini", "turns": [{"content": "`+says+`"}]}`), 0o600)
	}
	stage := func(name, role string) string {
		return `{"name": "` + name + `", "model_role": "` + role + `", "agent": {"agent_name": "` + name + `", "version": "v1",
			"model_name": "scripted:writer.json", "system_text": "Work.", "user_text": "${task}", "input_keys": ["task"]}}`
	}
	def := func(roles string) string {
		p := filepath.Join(dir, "pipeline.json")
		os.WriteFile(p, []byte(`{"pipeline_name": "roles", "version": "v1", "model_roles": `+roles+`,
			"stages": [`+stage("plan", "planner")+`, `+stage("check", "planner")+`]}`), 0o600)
		return p
	}
	for _, tc := range []struct {
		name, roles string
		flags       []string
		code        int
		want        []string
	}{
		{"the definition's roles", `{"planner": "scripted:careful.json"}`, nil, 0, []string{"plan=Careful plan.", "check=Careful plan."}},
		{"a flag swaps every stage of the role", `{"planner": "scripted:careful.json"}`, []string{"--model-role", "planner=scripted:" + filepath.Join(dir, "quick.json")}, 0,
			[]string{"plan=Quick plan.", "check=Quick plan."}},
		{"a role without a model", `{}`, nil, 2, []string{`stage plan: model_role "planner": model_roles gives it no model`}},
		{"a bad flag", `{}`, []string{"--model-role", "planner"}, 2, []string{"want ROLE=PROVIDER:MODEL"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			args := append([]string{"run", def(tc.roles), "--input", "task=plan", "--no-store", "--json", "-q"}, tc.flags...)
			code, out, errs := run(t, args...)
			var res struct {
				Envelope struct {
					Outputs map[string]map[string]any `json:"outputs"`
				} `json:"envelope"`
			}
			json.Unmarshal([]byte(out), &res)
			for _, w := range tc.want {
				stage, text, _ := strings.Cut(w, "=")
				if code != tc.code || res.Envelope.Outputs[stage]["text"] != text && !strings.Contains(errs, w) {
					t.Errorf("exit %d (want %d), want %q in\n%s%s", code, tc.code, w, out, errs)
				}
			}
		})
	}
	agentSpec := filepath.Join(dir, "agent.json")
	os.WriteFile(agentSpec, []byte(`{"agent_name": "a", "version": "v1", "model_name": "scripted:writer.json", "system_text": "Work."}`), 0o600)
	if code, _, errs := run(t, "run", agentSpec, "--model-role", "planner=scripted:quick.json"); code != 2 || !strings.Contains(errs, "is an agent") {
		t.Errorf("--model-role for an agent: exit %d\n%s", code, errs)
	}
}

// TestOutputName: an agent names its output (output_name); the Result
// says the name, a stage without an output_key keeps the output under
// it in the envelope, and a parent calling it as a sub-agent gets it
// under it.
func TestOutputName(t *testing.T) {
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "turns.json"), []byte(`{"turns": [{"content": "{\"summary\": \"All good.\"}"}]}`), 0o600)
	agentJSON := `{"agent_name": "summer", "version": "v1", "model_name": "scripted:turns.json", "system_text": "Sum up.", "output_name": "digest",
		"output_schema": {"type": "object", "properties": {"summary": {"type": "string"}}, "required": ["summary"]}}`
	spec := filepath.Join(dir, "agent.json")
	os.WriteFile(spec, []byte(agentJSON), 0o600)
	code, out, errs := run(t, "run", spec, "--no-store", "-q", "--json")
	var res map[string]any
	json.Unmarshal([]byte(out), &res)
	if code != 0 || res["output_name"] != "digest" {
		t.Errorf("the agent's Result: exit %d, output_name %v\n%s", code, res["output_name"], errs)
	}
	def := filepath.Join(dir, "pipeline.json")
	os.WriteFile(def, []byte(`{"pipeline_name": "p", "version": "v1", "stages": [{"name": "sum", "agent": `+agentJSON+`}]}`), 0o600)
	code, out, errs = run(t, "run", def, "--no-store", "-q", "--json")
	var pres struct {
		Envelope struct {
			Outputs map[string]map[string]any `json:"outputs"`
		} `json:"envelope"`
	}
	json.Unmarshal([]byte(out), &pres)
	if code != 0 || pres.Envelope.Outputs["digest"]["summary"] != "All good." || pres.Envelope.Outputs["sum"] != nil {
		t.Errorf("the stage's output, by its agent's output_name: exit %d, %v\n%s", code, pres.Envelope.Outputs, errs)
	}

	// As a sub-agent, its output reaches the parent under its name.
	agents := filepath.Join(dir, "agents")
	for name, body := range map[string]string{
		"summer/v1.json":    agentJSON,
		"summer/turns.json": `{"turns": [{"content": "{\"summary\": \"All good.\"}"}]}`,
		"boss/v1.json":      `{"agent_name": "boss", "version": "v1", "model_name": "scripted:turns.json", "system_text": "Ask.", "tools": ["agent:summer"]}`,
		"boss/turns.json":   `{"turns": [{"tool_calls": [{"name": "summer", "arguments": {}}]}, {"content": "Done."}]}`,
	} {
		os.MkdirAll(filepath.Join(agents, filepath.Dir(name)), 0o755)
		os.WriteFile(filepath.Join(agents, name), []byte(body), 0o600)
	}
	code, out, errs = run(t, "run", "boss", "--agents", agents, "--no-store", "-q", "--json")
	var bres struct {
		Steps []struct {
			Observation string `json:"observation"`
		} `json:"steps"`
	}
	json.Unmarshal([]byte(out), &bres)
	if code != 0 || len(bres.Steps) == 0 || bres.Steps[0].Observation != `{"digest":{"summary":"All good."}}` {
		t.Errorf("the sub-agent's output, to its parent: exit %d, %v\n%s%s", code, bres.Steps, out, errs)
	}
}

// TestServeModelRole: serve --model-role swaps the model of a served
// pipeline's stages of a role, over its definition's model_roles.
func TestServeModelRole(t *testing.T) {
	dir := t.TempDir()
	pipes, agents := filepath.Join(dir, "pipelines"), filepath.Join(dir, "agents")
	os.MkdirAll(pipes, 0o755)
	os.MkdirAll(agents, 0o755)
	for name, says := range map[string]string{"careful.json": "Careful plan.", "quick.json": "Quick plan."} {
		os.WriteFile(filepath.Join(dir, name), []byte(`{"model": "gpt-4.1-mini", "turns": [{"content": "`+says+`"}]}`), 0o600)
	}
	os.WriteFile(filepath.Join(pipes, "roles.json"), []byte(`{"pipeline_name": "roles", "version": "v1",
		"model_roles": {"planner": "scripted:`+filepath.Join(dir, "careful.json")+`"},
		"stages": [{"name": "plan", "model_role": "planner", "agent": {"agent_name": "plan", "version": "v1",
			"model_name": "scripted:none.json", "system_text": "Plan.", "user_text": "${task}", "input_keys": ["task"]}}]}`), 0o600)
	s := startServe(t, "--agents", agents, "--pipelines", pipes, "--db", filepath.Join(dir, "runs.db"),
		"--model-role", "planner=scripted:"+filepath.Join(dir, "quick.json"))
	code, res := s.call(t, "POST", "/v1/runs?wait=true", "", `{"pipeline": "roles", "input": {"task": "plan"}}`)
	env, _ := res["envelope"].(map[string]any)
	outs, _ := env["outputs"].(map[string]any)
	plan, _ := outs["plan"].(map[string]any)
	if code != 200 || plan["text"] != "Quick plan." {
		t.Errorf("a served pipeline's stage of the role: %d %v\n%s", code, res, s.out)
	}
}
