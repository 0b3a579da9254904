package server

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/agentry/agentry/agent"
	"github.com/agentry/agentry/llm"
	"github.com/agentry/agentry/spec"
)

// TestAGUIApproval: a run paused for approval ends its AG-UI run with an
// interrupt for the waiting call (its id the call's key, its toolCallId
// the call's); the client's resume on the same thread approves it, and
// the same agentry run goes on: the call's result (not the call again),
// the answer, RUN_FINISHED. The approval is on record under the key's
// name.
func TestAGUIApproval(t *testing.T) {
	f := newFixture(t, Config{Keys: []Key{{Name: "rui", SHA256: HashKey("run-key"), Role: RoleRunner}}})
	careful(t, f, "careful", 1)
	runID, ints := interrupted(t, f, "careful", "thread-a", "run-key")
	if len(ints) != 1 || ints[0]["reason"] != "tool_call" || ints[0]["toolCallId"] != "c1" ||
		!strings.HasPrefix(fmt.Sprint(ints[0]["id"]), runID+":") || ints[0]["responseSchema"] == nil {
		t.Fatalf("interrupts %v", ints)
	}
	id := fmt.Sprint(ints[0]["id"])
	got := f.agui(t, "careful", "run-key", aguiResumeOf("thread-a", "run-2",
		fmt.Sprintf(`{"interruptId": %q, "status": "resolved", "payload": {"approved": true}}`, id)))
	if got.status != 200 || got.runID != runID {
		t.Fatalf("%d %s %v", got.status, got.runID, got.err)
	}
	results := got.of("TOOL_CALL_RESULT")
	if len(got.of("TOOL_CALL_START")) != 0 || len(results) != 1 || results[0]["toolCallId"] != "c1" ||
		!strings.Contains(fmt.Sprint(results[0]["content"]), `"stored":true`) {
		t.Errorf("the resumed run's tool events %v", got.events)
	}
	end := got.last()
	if end["type"] != "RUN_FINISHED" || end["runId"] != "run-2" || fmt.Sprint(end["outcome"]) != "map[type:success]" || end["result"] != "Stored." {
		t.Errorf("RUN_FINISHED %v (%v)", end, got.types())
	}
	if _, run := f.do(t, "GET", "/v1/runs/"+runID, "run-key", ""); run["status"] != "completed" || run["session_id"] != "thread-a" {
		t.Errorf("the stored run %v", run)
	}
	if got := decisions(t, f, runID, "run-key"); got != "[approve tool:kv_set by rui]" {
		t.Errorf("decisions on record %s", got)
	}
	// The interrupt was answered: answering it again changes nothing.
	again := f.agui(t, "careful", "run-key", aguiResumeOf("thread-a", "run-3",
		fmt.Sprintf(`{"interruptId": %q, "status": "resolved", "payload": {"approved": true}}`, id)))
	if again.status != 409 {
		t.Errorf("a second resume: %d %v", again.status, again.err)
	}
}

// decisions are a run's human decisions on record in its audit log.
func decisions(t *testing.T, f *fixture, runID, key string) string {
	t.Helper()
	_, audit := f.do(t, "GET", "/v1/runs/"+runID+"/audit", key, "")
	var out []string
	for _, r := range audit["records"].([]any) {
		rec := r.(map[string]any)
		if d := rec["decision"]; d == "approve" || d == "deny" {
			out = append(out, fmt.Sprint(d, " ", rec["target"], " by ", rec["user_id"]))
		}
	}
	return fmt.Sprint(out)
}

// TestAGUIDeny: a resume denies a call unless it says approved: true,
// whatever else it says: approved false (with its reason), cancelled,
// resolved without a payload, approved not a boolean. The denied call's
// result tells why; the run goes on without running it.
func TestAGUIDeny(t *testing.T) {
	f := newFixture(t, Config{})
	careful(t, f, "careful", 1)
	for i, tc := range []struct{ name, answer, says string }{
		{"denied", `"status": "resolved", "payload": {"approved": false, "reason": "not today"}`, "not today"},
		{"cancelled", `"status": "cancelled"`, "denied"},
		{"no payload", `"status": "resolved"`, "denied"},
		{"not a boolean", `"status": "resolved", "payload": {"approved": "yes"}`, "denied"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			thread := fmt.Sprint("thread-", i)
			runID, ints := interrupted(t, f, "careful", thread, "")
			got := f.agui(t, "careful", "", aguiResumeOf(thread, "run-2", fmt.Sprintf(`{"interruptId": %q, %s}`, ints[0]["id"], tc.answer)))
			results := got.of("TOOL_CALL_RESULT")
			if got.status != 200 || len(results) != 1 || !strings.Contains(fmt.Sprint(results[0]["content"]), tc.says) || got.last()["type"] != "RUN_FINISHED" {
				t.Errorf("%d %v", got.status, got.events)
			}
			if d := decisions(t, f, runID, ""); d != "[deny tool:kv_set by anonymous]" {
				t.Errorf("decisions on record %s", d)
			}
		})
	}
}

// TestAGUIResumeRefused: a resume the store does not back is refused
// before anything runs: an interrupt of no run, of another thread, of
// another agent, one that does not wait, one of two calls left
// unanswered, interrupts of two runs.
func TestAGUIResumeRefused(t *testing.T) {
	f := newFixture(t, Config{})
	careful(t, f, "careful", 2)
	runID, ints := interrupted(t, f, "careful", "thread-r", "")
	if len(ints) != 2 {
		t.Fatalf("interrupts %v", ints)
	}
	yes := func(id any) string {
		return fmt.Sprintf(`{"interruptId": %q, "status": "resolved", "payload": {"approved": true}}`, id)
	}
	for _, tc := range []struct {
		name, agent, thread string
		entries             []string
		status              int
		says                string
	}{
		{"no such run", "careful", "thread-r", []string{yes("run_nope:1:0")}, 404, "run_nope"},
		{"another thread", "careful", "thread-x", []string{yes(ints[0]["id"]), yes(ints[1]["id"])}, 400, "thread"},
		{"another agent", "greeter", "thread-r", []string{yes(ints[0]["id"]), yes(ints[1]["id"])}, 400, "careful"},
		{"a call that does not wait", "careful", "thread-r", []string{yes(runID + ":9:9"), yes(ints[1]["id"])}, 400, ":9:9"},
		{"one left unanswered", "careful", "thread-r", []string{yes(ints[0]["id"])}, 400, fmt.Sprint(ints[1]["id"])},
		{"two runs", "careful", "thread-r", []string{yes(ints[0]["id"]), yes("run_other:1:0")}, 400, "two runs"},
		{"answered twice", "careful", "thread-r", []string{yes(ints[0]["id"]), yes(ints[0]["id"])}, 400, "twice"},
		{"no status", "careful", "thread-r", []string{fmt.Sprintf(`{"interruptId": %q}`, ints[0]["id"])}, 400, "status"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := f.agui(t, tc.agent, "", aguiResumeOf(tc.thread, "run-2", tc.entries...))
			e, _ := got.err["error"].(map[string]any)
			if got.status != tc.status || !strings.Contains(fmt.Sprint(e["message"]), tc.says) {
				t.Errorf("%d %v; want %d saying %q", got.status, got.err, tc.status, tc.says)
			}
		})
	}
	if _, run := f.do(t, "GET", "/v1/runs/"+runID, "", ""); run["status"] != "awaiting_approval" {
		t.Errorf("the run after the refusals: %v", run)
	}
}

// TestAGUIErrors: a request that cannot run is an HTTP error naming the
// problem; once the stream began, a run that fails is RUN_ERROR.
func TestAGUIErrors(t *testing.T) {
	keys := []Key{{Name: "rui", SHA256: HashKey("run-key"), Role: RoleRunner}, {Name: "val", SHA256: HashKey("view-key"), Role: RoleViewer}}
	f := newFixture(t, Config{Keys: keys, MaxBody: 512})
	in := aguiInputOf("t", "r", "user", "hi")
	for _, tc := range []struct {
		name, agent, key, body string
		header                 []string
		status                 int
		says                   string
	}{
		{"an agent not served", "nobody", "run-key", in, nil, 404, "nobody"},
		{"not JSON", "greeter", "run-key", `{"threadId": `, nil, 400, "RunAgentInput"},
		{"no threadId", "greeter", "run-key", `{"runId": "r", "messages": []}`, nil, 400, "threadId"},
		{"no user message", "greeter", "run-key", aguiInputOf("t", "r", "assistant", "hi"), nil, 400, "no user message"},
		{"too large", "greeter", "run-key", aguiInputOf("t", "r", "user", strings.Repeat("x", 600)), nil, 413, "512"},
		{"not sent as JSON", "greeter", "run-key", in, []string{"Content-Type", "text/plain"}, 415, "Content-Type"},
		{"no key", "greeter", "", in, nil, 401, "key"},
		{"a viewer's key", "greeter", "view-key", in, nil, 403, "runner"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := f.agui(t, tc.agent, tc.key, tc.body, tc.header...)
			e, _ := got.err["error"].(map[string]any)
			if got.status != tc.status || !strings.Contains(fmt.Sprint(e["message"]), tc.says) {
				t.Errorf("%d %v; want %d saying %q", got.status, got.err, tc.status, tc.says)
			}
		})
	}
	t.Run("a run that fails", func(t *testing.T) {
		a, err := agent.New(&spec.Spec{AgentName: "broken", Version: "v1", SystemText: "Fail."}, agent.WithProvider(failing{}, "test"))
		if err != nil {
			t.Fatal(err)
		}
		defer a.Close()
		if err := f.srv.cfg.Agents.Register(a); err != nil {
			t.Fatal(err)
		}
		got := f.agui(t, "broken", "run-key", in)
		end := got.last()
		if got.status != 200 || got.types()[0] != "RUN_STARTED" || end["type"] != "RUN_ERROR" || end["code"] != agent.CodeLLMError ||
			!strings.Contains(fmt.Sprint(end["message"]), "bad key") || len(got.of("RUN_FINISHED")) != 0 {
			t.Errorf("%d %v", got.status, got.events)
		}
	})
}

// failing is a model whose every call fails for good.
type failing struct{}

func (failing) Generate(context.Context, *llm.Request) (*llm.Response, error) {
	return nil, &llm.APIError{Kind: llm.KindAuth, Provider: "test", Status: 401, Message: "bad key"}
}

// TestAGUILimits: the endpoint keeps the server's bounds: a cross-site
// request to a server without keys, more streams than MaxStreams, a
// server shutting down.
func TestAGUILimits(t *testing.T) {
	f := newFixture(t, Config{MaxStreams: 1})
	in := aguiInputOf("t", "r", "user", "hi")
	if got := f.agui(t, "greeter", "", in, "Origin", "https://evil.example"); got.status != 403 {
		t.Errorf("cross-site: %d %v", got.status, got.err)
	}
	_, stream := f.waiting(t) // the one stream the server has room for
	if got := f.agui(t, "greeter", "", in); got.status != 429 {
		t.Errorf("past MaxStreams: %d %v", got.status, got.err)
	}
	close(f.release)
	parseSSE(t, stream)
	stream.Close()
	f2 := newFixture(t, Config{})
	f2.srv.mu.Lock()
	f2.srv.stopping = true
	f2.srv.mu.Unlock()
	if got := f2.agui(t, "greeter", "", in); got.status != 503 {
		t.Errorf("stopping: %d %v", got.status, got.err)
	}
}
