package server

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2aclient"
	"github.com/a2aproject/a2a-go/v2/a2aclient/agentcard"
	"github.com/a2aproject/a2a-go/v2/a2acompat/a2av0"
)

// a2aClient is the SDK's client of the agent whose card is at base (the
// server's URL, or an agent's /a2a/NAME under it), sending key (bearer:
// mcp_test.go).
func a2aClient(t *testing.T, base, key string) (*a2aclient.Client, *a2a.AgentCard) {
	t.Helper()
	ctx := context.Background()
	card, err := agentcard.DefaultResolver.Resolve(ctx, base)
	if err != nil {
		t.Fatalf("card at %s: %v", base, err)
	}
	c, err := a2aclient.NewFromCard(ctx, card, a2aclient.WithJSONRPCTransport(&http.Client{Transport: bearer{key}}))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Destroy() })
	return c, card
}

// say is a user's message of text parts.
func say(text string) *a2a.SendMessageRequest {
	return &a2a.SendMessageRequest{Message: a2a.NewMessage(a2a.MessageRoleUser, a2a.NewTextPart(text))}
}

// sent sends req and returns the task it answers with.
func sent(t *testing.T, c *a2aclient.Client, req *a2a.SendMessageRequest) *a2a.Task {
	t.Helper()
	res, err := c.SendMessage(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	task, ok := res.(*a2a.Task)
	if !ok {
		t.Fatalf("the answer is a %T, not a task", res)
	}
	return task
}

// taskAnswer is the text of a task's answer artifact.
func taskAnswer(task *a2a.Task) string {
	var b strings.Builder
	for _, a := range task.Artifacts {
		for _, p := range a.Parts {
			b.WriteString(p.Text())
		}
	}
	return b.String()
}

// statusText is the text of a task's status message.
func statusText(s a2a.TaskStatus) string {
	if s.Message == nil {
		return ""
	}
	var b strings.Builder
	for _, p := range s.Message.Parts {
		b.WriteString(p.Text())
	}
	return b.String()
}

// TestA2ACards: the well-known card is the default agent's, each agent
// has its own at /a2a/NAME, their endpoints the server's, for A2A 1.0
// and 0.3; a server with keys declares the bearer scheme; a server of
// several agents and no default has no well-known card.
func TestA2ACards(t *testing.T) {
	f := newFixture(t, Config{A2AAgent: "greeter"})
	_, card := a2aClient(t, f.http.URL, "")
	if card.Name != "greeter" || card.Version != "v1" || !card.Capabilities.Streaming || len(card.Skills) != 1 ||
		card.Skills[0].ID != "greeter" || !strings.Contains(card.Skills[0].Description, `"task"`) || len(card.SecuritySchemes) != 0 {
		t.Errorf("card %+v", card)
	}
	if len(card.SupportedInterfaces) != 2 || card.SupportedInterfaces[0].URL != f.http.URL+"/a2a" ||
		card.SupportedInterfaces[0].ProtocolVersion != a2a.Version || card.SupportedInterfaces[1].ProtocolVersion != a2av0.Version {
		t.Errorf("interfaces %v", card.SupportedInterfaces)
	}
	_, card = a2aClient(t, f.http.URL+"/a2a/waiter", "")
	if card.Name != "waiter" || card.SupportedInterfaces[0].URL != f.http.URL+"/a2a/waiter" {
		t.Errorf("waiter's card %+v", card)
	}
	// 0.3's clients read the same card.
	old, err := (&agentcard.Resolver{CardParser: a2av0.NewAgentCardParser()}).Resolve(context.Background(), f.http.URL+"/a2a/waiter")
	if err != nil || old.Name != "waiter" || len(old.SupportedInterfaces) == 0 {
		t.Errorf("as 0.3: %v %+v", err, old)
	}
	code, _ := f.do(t, "GET", "/a2a/greeter/.well-known/agent-card.json", "", "")
	if code != 200 {
		t.Errorf("the card as the document says: %d", code)
	}

	keyed := newFixture(t, Config{Keys: []Key{{Name: "ci", SHA256: HashKey("k"), Role: RoleRunner}}})
	code, body := keyed.do(t, "GET", "/.well-known/agent-card.json", "", "")
	if code != 404 || !strings.Contains(fmt.Sprint(body), "/a2a/NAME/.well-known/agent-card.json") {
		t.Errorf("no default agent: %d %v", code, body)
	}
	_, card = a2aClient(t, keyed.http.URL+"/a2a/greeter", "")
	if _, ok := card.SecuritySchemes["bearer"]; !ok || len(card.SecurityRequirements) != 1 {
		t.Errorf("a keyed server's card: %+v %+v", card.SecuritySchemes, card.SecurityRequirements)
	}
	if code, _ := keyed.do(t, "GET", "/a2a/nobody/.well-known/agent-card.json", "", ""); code != 404 {
		t.Errorf("an unknown agent's card: %d", code)
	}
}

// TestA2ASend: a message/send round trip with the SDK's client: the task
// completes, its artifact holds the answer, it names its run, which is
// an ordinary stored run in the task's context (its session); GetTask
// reads it again.
func TestA2ASend(t *testing.T) {
	f := newFixture(t, Config{})
	c, _ := a2aClient(t, f.http.URL+"/a2a/greeter", "")
	task := sent(t, c, say("greet Ada"))
	if task.Status.State != a2a.TaskStateCompleted || taskAnswer(task) != "Hello, Ada." {
		t.Fatalf("task %s %q: %+v", task.Status.State, taskAnswer(task), task)
	}
	runID := runOf(task.Metadata)
	_, run := f.do(t, "GET", "/v1/runs/"+runID, "", "")
	if run["status"] != "completed" || run["agent"] != "greeter" || run["session_id"] != task.ContextID {
		t.Errorf("the stored run %v (task context %s)", run, task.ContextID)
	}
	again, err := c.GetTask(context.Background(), &a2a.GetTaskRequest{ID: task.ID})
	if err != nil || again.Status.State != a2a.TaskStateCompleted || taskAnswer(again) != "Hello, Ada." {
		t.Errorf("GetTask: %v %+v", err, again)
	}
	// The same context again: another run of the same session.
	next := say("greet Ada")
	next.Message.ContextID = task.ContextID
	second := sent(t, c, next)
	if second.ContextID != task.ContextID || runOf(second.Metadata) == runID {
		t.Errorf("second task %+v", second)
	}
	// An input the agent does not take: the task is rejected, no run.
	data := &a2a.SendMessageRequest{Message: a2a.NewMessage(a2a.MessageRoleUser, a2a.NewDataPart([]any{1, 2}))}
	if bad := sent(t, c, data); bad.Status.State != a2a.TaskStateRejected || !strings.Contains(statusText(bad.Status), "not a JSON object") {
		t.Errorf("a bad input: %s %q", bad.Status.State, statusText(bad.Status))
	}
}

// TestA2AStream: message/stream sends the task, working, the tool call
// and the thought as status messages, the answer artifact, completed
// last, in the order the run went.
func TestA2AStream(t *testing.T) {
	f := newFixture(t, Config{})
	c, _ := a2aClient(t, f.http.URL+"/a2a/greeter", "")
	var got []string
	var final *a2a.TaskArtifactUpdateEvent
	for ev, err := range c.SendStreamingMessage(context.Background(), say("greet Ada")) {
		if err != nil {
			t.Fatal(err)
		}
		switch e := ev.(type) {
		case *a2a.Task:
			got = append(got, "task "+string(e.Status.State))
		case *a2a.TaskStatusUpdateEvent:
			got = append(got, strings.TrimSpace(string(e.Status.State)+" "+statusText(e.Status)))
		case *a2a.TaskArtifactUpdateEvent:
			got = append(got, fmt.Sprintf("artifact %s append=%v last=%v", e.Artifact.Parts[0].Text(), e.Append, e.LastChunk))
			final = e
		}
	}
	want := []string{"task TASK_STATE_SUBMITTED", "TASK_STATE_WORKING", "TASK_STATE_WORKING Calling the tool kv_set.",
		"TASK_STATE_WORKING Looking.", "artifact Hello, Ada. append=false last=false", "artifact Hello, Ada. append=false last=true",
		"TASK_STATE_COMPLETED"}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("events\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if final == nil || final.Artifact.Name != "answer" {
		t.Errorf("the last artifact %+v", final)
	}
}

// TestA2ACancel: canceling the task of a run going aborts the run: the
// stream ends canceled, and the stored run is aborted.
func TestA2ACancel(t *testing.T) {
	f := newFixture(t, Config{})
	c, _ := a2aClient(t, f.http.URL+"/a2a/waiter", "")
	var last a2a.TaskState
	var runID string
	for ev, err := range c.SendStreamingMessage(context.Background(), say("wait")) {
		if err != nil {
			t.Fatal(err)
		}
		if e, ok := ev.(*a2a.TaskStatusUpdateEvent); ok {
			last = e.Status.State
			if e.Status.State == a2a.TaskStateWorking && runID == "" {
				runID = runOf(e.Metadata)
				task, err := c.CancelTask(context.Background(), &a2a.CancelTaskRequest{ID: e.TaskID})
				if err != nil || task.Status.State != a2a.TaskStateCanceled {
					t.Fatalf("cancel: %v %+v", err, task)
				}
			}
		}
	}
	if last != a2a.TaskStateCanceled {
		t.Errorf("the stream ended %s", last)
	}
	f.stream(t, runID, 0) // to the run's end
	if _, run := f.do(t, "GET", "/v1/runs/"+runID, "", ""); run["status"] != "aborted" {
		t.Errorf("the run %v", run)
	}
}
