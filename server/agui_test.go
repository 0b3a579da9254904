package server

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/agentry/agentry/agent"
	"github.com/agentry/agentry/llm"
	"github.com/agentry/agentry/llm/scripted"
	"github.com/agentry/agentry/policy"
	"github.com/agentry/agentry/spec"
)

// aguiReply is what POST /ag-ui/{agent} answered: its AG-UI events, or
// an error (checked against the OpenAPI document).
type aguiReply struct {
	status int
	runID  string // X-Agentry-Run-Id
	events []map[string]any
	err    map[string]any
}

// types lists the events' types, in order.
func (r aguiReply) types() []string {
	out := make([]string, len(r.events))
	for i, e := range r.events {
		out[i] = fmt.Sprint(e["type"])
	}
	return out
}

// of returns the events of type typ.
func (r aguiReply) of(typ string) []map[string]any {
	var out []map[string]any
	for _, e := range r.events {
		if e["type"] == typ {
			out = append(out, e)
		}
	}
	return out
}

// last is the last event: RUN_FINISHED or RUN_ERROR.
func (r aguiReply) last() map[string]any {
	if len(r.events) == 0 {
		return nil
	}
	return r.events[len(r.events)-1]
}

// agui posts body to /ag-ui/AGENT with key (none when "") and reads the
// answer to its end.
func (f *fixture) agui(t *testing.T, agentName, key, body string, header ...string) aguiReply {
	t.Helper()
	path := "/ag-ui/" + agentName
	req, _ := http.NewRequest("POST", f.http.URL+path, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	out := aguiReply{status: resp.StatusCode, runID: resp.Header.Get("X-Agentry-Run-Id")}
	if resp.StatusCode != 200 {
		data, _ := io.ReadAll(resp.Body)
		checkResponse(t, "POST", path, resp.StatusCode, data)
		json.Unmarshal(data, &out.err)
		return out
	}
	if ct := resp.Header.Get("Content-Type"); ct != "text/event-stream" {
		t.Errorf("Content-Type %q", ct)
	}
	out.events = aguiEvents(t, resp.Body)
	return out
}

// aguiEvents reads AG-UI events (data: lines of JSON) to the end of r.
func aguiEvents(t *testing.T, r io.Reader) []map[string]any {
	t.Helper()
	var out []map[string]any
	sc := bufio.NewScanner(r)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		if data, ok := strings.CutPrefix(sc.Text(), "data: "); ok {
			var e map[string]any
			if err := json.Unmarshal([]byte(data), &e); err != nil {
				t.Fatalf("not JSON: %s", data)
			}
			out = append(out, e)
		}
	}
	return out
}

// aguiInputOf is a RunAgentInput on thread with the messages given as
// role, content pairs.
func aguiInputOf(thread, run string, msgs ...string) string {
	var m []map[string]any
	for i := 0; i+1 < len(msgs); i += 2 {
		m = append(m, map[string]any{"id": fmt.Sprint("m", i), "role": msgs[i], "content": msgs[i+1]})
	}
	b, _ := json.Marshal(map[string]any{"threadId": thread, "runId": run, "messages": m, "tools": []any{}, "context": []any{},
		"state": map[string]any{"theme": "dark"}, "forwardedProps": map[string]any{}})
	return string(b)
}

// aguiResumeOf is a RunAgentInput on thread that answers interrupts with
// entries (each a JSON object).
func aguiResumeOf(thread, run string, entries ...string) string {
	return fmt.Sprintf(`{"threadId": %q, "runId": %q, "messages": [{"id": "m0", "role": "user", "content": "store it"}], "resume": [%s]}`,
		thread, run, strings.Join(entries, ", "))
}

// TestAGUI: an agent with a tool, run from an AG-UI input: its events in
// AG-UI's order (the turn's thought as reasoning, the tool call whole
// with its result, the answer as a text message), the client's state
// kept with the run's progress, and an ordinary stored run in the
// session of the thread.
func TestAGUI(t *testing.T) {
	f := newFixture(t, Config{})
	in := aguiInputOf("thread-1", "run-a", "user", "hello", "assistant", "Hi.", "user", "greet Ada")
	got := f.agui(t, "greeter", "", in)
	want := []string{"RUN_STARTED", "STATE_SNAPSHOT",
		"STEP_STARTED", "REASONING_START", "REASONING_MESSAGE_START", "REASONING_MESSAGE_CONTENT", "REASONING_MESSAGE_END", "REASONING_END",
		"TOOL_CALL_START", "TOOL_CALL_ARGS", "TOOL_CALL_END", "TOOL_CALL_RESULT", "STEP_FINISHED", "STATE_DELTA",
		"STEP_STARTED", "TEXT_MESSAGE_START", "TEXT_MESSAGE_CONTENT", "TEXT_MESSAGE_END", "STEP_FINISHED", "STATE_DELTA",
		"STATE_SNAPSHOT", "RUN_FINISHED"}
	if got.status != 200 || fmt.Sprint(got.types()) != fmt.Sprint(want) {
		t.Fatalf("%d\n got  %v\n want %v", got.status, got.types(), want)
	}
	start, end := got.events[0], got.last()
	if start["threadId"] != "thread-1" || start["runId"] != "run-a" || start["protocolVersion"] != "1.0" {
		t.Errorf("RUN_STARTED %v", start)
	}
	if end["threadId"] != "thread-1" || end["runId"] != "run-a" || end["result"] != "Hello, Ada." ||
		fmt.Sprint(end["outcome"]) != "map[type:success]" {
		t.Errorf("RUN_FINISHED %v", end)
	}
	if c := got.of("REASONING_MESSAGE_CONTENT")[0]; c["delta"] != "Looking." {
		t.Errorf("the thought %v", c)
	}
	call, args, result := got.of("TOOL_CALL_START")[0], got.of("TOOL_CALL_ARGS")[0], got.of("TOOL_CALL_RESULT")[0]
	if call["toolCallName"] != "kv_set" || args["toolCallId"] != call["toolCallId"] || result["toolCallId"] != call["toolCallId"] ||
		!strings.Contains(fmt.Sprint(args["delta"]), `"key":"k"`) || !strings.Contains(fmt.Sprint(result["content"]), `"stored":true`) {
		t.Errorf("the tool call %v %v %v", call, args, result)
	}
	if text := got.of("TEXT_MESSAGE_CONTENT")[0]; text["delta"] != "Hello, Ada." {
		t.Errorf("the answer %v", text)
	}
	final := got.of("STATE_SNAPSHOT")[1]["snapshot"].(map[string]any)
	progress := final["agentry"].(map[string]any)
	if final["theme"] != "dark" || progress["runId"] != got.runID || progress["status"] != "completed" || progress["agent"] != "greeter@v1" {
		t.Errorf("the state %v", final)
	}
	code, run := f.do(t, "GET", "/v1/runs/"+got.runID, "", "")
	if code != 200 || run["status"] != "completed" || run["session_id"] != "thread-1" || run["agent"] != "greeter" {
		t.Errorf("the stored run: %d %v", code, run)
	}
}

// TestAGUIText: an agent without tools streams its text as the model
// writes it, as one text message in its turn; a model that does not
// stream has its answer sent when the run ends.
func TestAGUIText(t *testing.T) {
	f := newFixture(t, Config{})
	script, err := scripted.New("plain", scripted.Turn{Content: "Hi there."})
	if err != nil {
		t.Fatal(err)
	}
	a, err := agent.New(&spec.Spec{AgentName: "plain", Version: "v1", SystemText: "Talk."}, agent.WithProvider(script.Model(), "scripted"))
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	if err := f.srv.cfg.Agents.Register(a); err != nil {
		t.Fatal(err)
	}
	got := f.agui(t, "plain", "", aguiInputOf("t", "r", "user", "hi"))
	want := "[RUN_STARTED STATE_SNAPSHOT STEP_STARTED TEXT_MESSAGE_START TEXT_MESSAGE_CONTENT TEXT_MESSAGE_END STEP_FINISHED STATE_DELTA STATE_SNAPSHOT RUN_FINISHED]"
	if fmt.Sprint(got.types()) != want || got.of("TEXT_MESSAGE_CONTENT")[0]["delta"] != "Hi there." || got.last()["result"] != "Hi there." {
		t.Errorf("streamed: %v\n%v", got.types(), got.events)
	}
	close(f.release)
	got = f.agui(t, "waiter@v1", "", aguiInputOf("t", "r2", "user", "wait"))
	want = "[RUN_STARTED STATE_SNAPSHOT STEP_STARTED STEP_FINISHED STATE_DELTA TEXT_MESSAGE_START TEXT_MESSAGE_CONTENT TEXT_MESSAGE_END STATE_SNAPSHOT RUN_FINISHED]"
	if fmt.Sprint(got.types()) != want || got.of("TEXT_MESSAGE_CONTENT")[0]["delta"] != "released" || got.last()["result"] != "released" {
		t.Errorf("not streamed: %v\n%v", got.types(), got.events)
	}
}

// careful registers an agent whose kv_set waits for a person's approval:
// its model calls kv_set calls times a turn, then says it stored them.
// A resumed run's agent is built with the server's options: they get
// the same model.
func careful(t *testing.T, f *fixture, name string, calls int) {
	t.Helper()
	a, err := agent.New(&spec.Spec{AgentName: name, Version: "v1", SystemText: "Store.", Tools: []string{"kv_set"},
		Policy: &policy.Policy{Approval: policy.Approval{Tools: []string{"kv_set"}}}},
		agent.WithProvider(storer{calls}, "test"), agent.WithTools(kvRegistry(t)))
	if err != nil {
		t.Fatal(err)
	}
	f.srv.cfg.AgentOptions = append(f.srv.cfg.AgentOptions, agent.WithProvider(storer{calls}, "test"))
	t.Cleanup(func() { a.Close() })
	if err := f.srv.cfg.Agents.Register(a); err != nil {
		t.Fatal(err)
	}
}

// storer is a model that stores n values with a tool in one turn, and
// once it has the results says so.
type storer struct{ n int }

func (s storer) Generate(_ context.Context, req *llm.Request) (*llm.Response, error) {
	r := &llm.Response{Content: "Storing.", Usage: llm.Usage{PromptTokens: 9, CompletionTokens: 4, TotalTokens: 13}}
	if req.Messages[len(req.Messages)-1].Role == llm.RoleTool {
		r.Content = "Stored."
		return r, nil
	}
	for i := range s.n {
		r.ToolCalls = append(r.ToolCalls, llm.ToolCall{ID: fmt.Sprint("c", i+1), Name: "kv_set",
			Arguments: json.RawMessage(fmt.Sprintf(`{"key": "k%d", "value": "v"}`, i+1))})
	}
	return r, nil
}

// interrupted runs the careful agent on thread and returns its
// interrupts: the AG-UI run ends with an interrupt outcome, and the
// call waiting for approval has no result.
func interrupted(t *testing.T, f *fixture, agentName, thread, key string) (runID string, interrupts []map[string]any) {
	t.Helper()
	got := f.agui(t, agentName, key, aguiInputOf(thread, "run-1", "user", "store it"))
	end := got.last()
	outcome, _ := end["outcome"].(map[string]any)
	if got.status != 200 || end["type"] != "RUN_FINISHED" || outcome["type"] != "interrupt" || len(got.of("TOOL_CALL_RESULT")) != 0 {
		t.Fatalf("%d %v\n%v", got.status, got.types(), end)
	}
	for _, i := range outcome["interrupts"].([]any) {
		interrupts = append(interrupts, i.(map[string]any))
	}
	if _, run := f.do(t, "GET", "/v1/runs/"+got.runID, key, ""); run["status"] != "awaiting_approval" {
		t.Fatalf("the paused run: %v", run)
	}
	return got.runID, interrupts
}

// aguiOpen posts body to /ag-ui/AGENT and returns the open stream, read
// line by line, closed when the test ends.
func (f *fixture) aguiOpen(t *testing.T, agentName, body string) *bufio.Scanner {
	t.Helper()
	resp, err := http.Post(f.http.URL+"/ag-ui/"+agentName, "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	if resp.StatusCode != 200 {
		t.Fatalf("%d", resp.StatusCode)
	}
	return bufio.NewScanner(resp.Body)
}

// readTo reads sc to the first line that has want, and returns it.
func readTo(t *testing.T, sc *bufio.Scanner, want string) string {
	t.Helper()
	for sc.Scan() {
		if strings.Contains(sc.Text(), want) {
			return sc.Text()
		}
	}
	t.Fatalf("the stream ended before %q", want)
	return ""
}

// TestAGUIQuiet: a quiet stream gets heartbeat comments; a client that
// goes away leaves the run going, to its end.
func TestAGUIQuiet(t *testing.T) {
	f := newFixture(t, Config{})
	f.srv.heartbeat = time.Millisecond
	sc := f.aguiOpen(t, "waiter", aguiInputOf("t", "r", "user", "wait"))
	start := readTo(t, sc, "RUN_STARTED")
	readTo(t, sc, ": heartbeat")
	var e struct {
		Metadata struct{ Agentry struct{ RunID string } }
	}
	json.Unmarshal([]byte(strings.TrimPrefix(start, "data: ")), &e)
	f.http.CloseClientConnections() // the client goes away
	close(f.release)
	waitFor(t, func() bool {
		_, run := f.do(t, "GET", "/v1/runs/"+e.Metadata.Agentry.RunID, "", "")
		return run["status"] == "completed"
	})
}

// TestAGUIInterrupted: a run the server interrupts as it shuts down ends
// its AG-UI run with RUN_ERROR "interrupted".
func TestAGUIInterrupted(t *testing.T) {
	f := newFixture(t, Config{})
	sc := f.aguiOpen(t, "waiter", aguiInputOf("t", "r", "user", "wait"))
	readTo(t, sc, "STEP_STARTED") // the run is going
	ctx, cancel := context.WithCancel(context.Background())
	cancel() // no grace: the runs going are interrupted at once
	if err := f.srv.Close(ctx); err != nil {
		t.Fatal(err)
	}
	end := readTo(t, sc, "RUN_ERROR")
	if !strings.Contains(end, `"code":"interrupted"`) || !strings.Contains(end, "--resume-interrupted") {
		t.Errorf("%s", end)
	}
}
