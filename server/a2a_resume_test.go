package server

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2aclient"
	"github.com/a2aproject/a2a-go/v2/a2acompat/a2av0"
)

// reply is a message on task: its parts.
func reply(task *a2a.Task, parts ...*a2a.Part) *a2a.SendMessageRequest {
	m := a2a.NewMessageForTask(a2a.MessageRoleUser, task, parts...)
	return &a2a.SendMessageRequest{Message: m}
}

// TestA2AApproval: a run paused for approval is a task waiting for
// input, its status message listing the calls; a reply that decides
// nothing leaves it waiting; {"approved": true} resumes the same run,
// which completes the task, the approval on record under the key's name.
func TestA2AApproval(t *testing.T) {
	f := newFixture(t, Config{Keys: []Key{{Name: "rui", SHA256: HashKey("run-key"), Role: RoleRunner}}})
	careful(t, f, "careful", 1)
	c, _ := a2aClient(t, f.http.URL+"/a2a/careful", "run-key")
	task := sent(t, c, say("store it"))
	runID := runOf(task.Metadata)
	if task.Status.State != a2a.TaskStateInputRequired || !strings.Contains(statusText(task.Status), "approval") ||
		len(task.Status.Message.Parts) != 2 || !strings.Contains(fmt.Sprint(task.Status.Message.Parts[1].Data()), "kv_set") {
		t.Fatalf("task %s %q %v", task.Status.State, statusText(task.Status), task.Status.Message)
	}
	if _, run := f.do(t, "GET", "/v1/runs/"+runID, "run-key", ""); run["status"] != "awaiting_approval" {
		t.Fatalf("the run %v", run)
	}
	still := sent(t, c, reply(task, a2a.NewTextPart("yes please")))
	if still.Status.State != a2a.TaskStateInputRequired || !strings.Contains(statusText(still.Status), "no decision") ||
		len(still.Status.Message.Parts) != 2 {
		t.Fatalf("a reply that decides nothing: %s %q", still.Status.State, statusText(still.Status))
	}
	done := sent(t, c, reply(task, a2a.NewDataPart(map[string]any{"approved": true})))
	if done.Status.State != a2a.TaskStateCompleted || taskAnswer(done) != "Stored." || runOf(done.Metadata) != runID {
		t.Fatalf("approved: %s %q %v", done.Status.State, taskAnswer(done), done.Metadata)
	}
	if got := decisions(t, f, runID, "run-key"); got != "[approve tool:kv_set by rui]" {
		t.Errorf("decisions on record %s", got)
	}
}

// TestA2ADenyAndCancel: a reply naming the call in "deny" denies it
// (the model is told why); canceling a task that waits for approval
// aborts its run.
func TestA2ADenyAndCancel(t *testing.T) {
	f := newFixture(t, Config{})
	careful(t, f, "careful", 1)
	c, _ := a2aClient(t, f.http.URL+"/a2a/careful", "")
	task := sent(t, c, say("store it"))
	done := sent(t, c, reply(task, a2a.NewTextPart(`{"deny": ["c1"], "reason": "not today"}`)))
	if done.Status.State != a2a.TaskStateCompleted {
		t.Fatalf("denied: %s %q", done.Status.State, statusText(done.Status))
	}
	if got := decisions(t, f, runOf(done.Metadata), ""); got != "[deny tool:kv_set by anonymous]" {
		t.Errorf("decisions on record %s", got)
	}

	task = sent(t, c, say("store it"))
	canceled, err := c.CancelTask(context.Background(), &a2a.CancelTaskRequest{ID: task.ID})
	if err != nil || canceled.Status.State != a2a.TaskStateCanceled {
		t.Fatalf("cancel: %v %+v", err, canceled)
	}
	if _, run := f.do(t, "GET", "/v1/runs/"+runOf(task.Metadata), "", ""); run["status"] != "aborted" {
		t.Errorf("the canceled task's run %v", run)
	}
	// A canceled task takes no more messages.
	if _, err := c.SendMessage(context.Background(), reply(task, a2a.NewTextPart(`{"approved": true}`))); err == nil {
		t.Error("a message to a canceled task was taken")
	}
}

// TestA2AAuth: the keys and roles of the other routes: no key 401, a
// viewer's key reads its user's tasks but sends no message (403), a
// runner's sends; another user's viewer does not find the task; the
// errors are JSON-RPC's, with the HTTP status.
func TestA2AAuth(t *testing.T) {
	f := newFixture(t, Config{Keys: []Key{{Name: "ci", SHA256: HashKey("run-key"), Role: RoleRunner},
		{Name: "ci", SHA256: HashKey("view-key"), Role: RoleViewer}, {Name: "eve", SHA256: HashKey("eve-key"), Role: RoleViewer}}})
	send := `{"jsonrpc": "2.0", "id": 1, "method": "SendMessage", "params": {"message": {"messageId": "m1", "role": "ROLE_USER", "parts": [{"text": "hi"}]}}}`
	for _, tc := range []struct {
		key  string
		code int
		rpc  float64
	}{{"", 401, -31401}, {"nope", 401, -31401}, {"view-key", 403, -31403}} {
		code, body := f.do(t, "POST", "/a2a/greeter", tc.key, send)
		e, _ := body["error"].(map[string]any)
		if code != tc.code || e["code"] != tc.rpc || body["jsonrpc"] != "2.0" {
			t.Errorf("key %q: %d %v", tc.key, code, body)
		}
	}
	runner, _ := a2aClient(t, f.http.URL+"/a2a/greeter", "run-key")
	task := sent(t, runner, say("greet Ada"))
	viewer, _ := a2aClient(t, f.http.URL+"/a2a/greeter", "view-key")
	if got, err := viewer.GetTask(context.Background(), &a2a.GetTaskRequest{ID: task.ID}); err != nil || got.Status.State != a2a.TaskStateCompleted {
		t.Errorf("a viewer's GetTask: %v %+v", err, got)
	}
	if _, err := viewer.SendMessage(context.Background(), say("greet Ada")); err == nil || !strings.Contains(err.Error(), "403") {
		t.Errorf("a viewer's SendMessage: %v", err)
	}
	eve, _ := a2aClient(t, f.http.URL+"/a2a/greeter", "eve-key")
	if got, err := eve.GetTask(context.Background(), &a2a.GetTaskRequest{ID: task.ID}); !errors.Is(err, a2a.ErrTaskNotFound) {
		t.Errorf("another user's GetTask: %v %+v", err, got)
	}
	if _, run := f.do(t, "GET", "/v1/runs/"+runOf(task.Metadata), "run-key", ""); run["status"] != "completed" {
		t.Errorf("the run %v", run)
	}
}

// TestA2ARefusals: an unknown agent, no default agent, a version the
// server does not speak, a body not sent as JSON: each answered before
// the SDK reads the request, with its status.
func TestA2ARefusals(t *testing.T) {
	f := newFixture(t, Config{})
	send := `{"jsonrpc": "2.0", "id": 1, "method": "SendMessage", "params": {}}`
	if code, body := f.do(t, "POST", "/a2a/nobody", "", send); code != 404 || !strings.Contains(fmt.Sprint(body), `agent "nobody"`) {
		t.Errorf("an unknown agent: %d %v", code, body)
	}
	if code, body := f.do(t, "POST", "/a2a", "", send); code != 404 || !strings.Contains(fmt.Sprint(body), "serves 2 agents") {
		t.Errorf("no default agent: %d %v", code, body)
	}
	code, body := post(t, f.http.URL+"/a2a/greeter", send, map[string]string{"A2A-Version": "2.0"})
	if e, _ := body["error"].(map[string]any); code != 400 || e["code"] != float64(-32009) {
		t.Errorf("version 2.0: %d %v", code, body)
	}
	checkResponse(t, "POST", "/a2a/greeter", code, []byte(`{"jsonrpc": "2.0", "id": null, "error": {"code": -32009, "message": "x"}}`))
	code, _ = post(t, f.http.URL+"/a2a/greeter", send, map[string]string{"Content-Type": "text/plain"})
	if code != 415 {
		t.Errorf("text/plain: %d", code)
	}
	// A request the SDK refuses is JSON-RPC's error, with 200.
	if code, body := f.do(t, "POST", "/a2a/greeter", "", `{"jsonrpc": "2.0", "id": 1, "method": "NoSuchMethod"}`); code != 200 || body["error"] == nil {
		t.Errorf("an unknown method: %d %v", code, body)
	}
}

// TestA2ALegacy: A2A 0.3 on the same endpoint: the SDK's 0.3 client
// sends message/send and reads the task; a raw 0.3 request gets 0.3's
// wire form (kind, state in lower case).
func TestA2ALegacy(t *testing.T) {
	f := newFixture(t, Config{A2AAgent: "greeter"})
	ctx := context.Background()
	c, err := a2aclient.NewFromEndpoints(ctx, []*a2a.AgentInterface{{URL: f.http.URL + "/a2a", ProtocolBinding: a2a.TransportProtocolJSONRPC, ProtocolVersion: a2av0.Version}},
		a2aclient.WithDefaultsDisabled(), a2aclient.WithCompatTransport(a2av0.Version, a2a.TransportProtocolJSONRPC, a2av0.NewJSONRPCTransportFactory(a2av0.JSONRPCTransportConfig{})))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Destroy()
	task := sent(t, c, say("greet Ada"))
	if task.Status.State != a2a.TaskStateCompleted || taskAnswer(task) != "Hello, Ada." {
		t.Errorf("0.3 task %s %q", task.Status.State, taskAnswer(task))
	}
	f = newFixture(t, Config{A2AAgent: "greeter"}) // the scripted model anew
	code, body := f.do(t, "POST", "/a2a", "", `{"jsonrpc": "2.0", "id": "r1", "method": "message/send",
		"params": {"message": {"kind": "message", "messageId": "m1", "role": "user", "parts": [{"kind": "text", "text": "greet Ada"}]}}}`)
	res, _ := body["result"].(map[string]any)
	status, _ := res["status"].(map[string]any)
	if code != 200 || res["kind"] != "task" || status["state"] != "completed" || !strings.Contains(fmt.Sprint(res["artifacts"]), "Hello, Ada.") {
		t.Errorf("raw 0.3: %d %v", code, body)
	}
}
