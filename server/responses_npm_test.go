package server

import (
	"encoding/json"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/agentry/agentry/internal/testdb"
)

// node runs a test script of testdata in Node with the pinned npm
// packages, and env, and decodes the JSON line it prints into out.
func node(t *testing.T, modules string, env []string, out any, args ...string) {
	t.Helper()
	cmd := exec.Command("node", args...)
	cmd.Env = append(append(os.Environ(), "NODE_PATH="+modules), env...)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	data, err := cmd.Output()
	if err != nil {
		t.Fatalf("node %s: %v\n%s", args[0], err, stderr.String())
	}
	if err := json.Unmarshal(data, out); err != nil {
		t.Fatalf("%v: %s\n%s", err, data, stderr.String())
	}
}

// TestResponsesNodeClient: the npm "openai" client's Responses API:
// create, one from it (previous_response_id), retrieve, responses.stream
// with OpenAI's events in order, background then cancel, and delete.
func TestResponsesNodeClient(t *testing.T) {
	modules := testdb.NPM(t, "openai")
	f := newFixture(t, Config{})
	m := f.serveListener(t)
	var got struct {
		Second, Retrieved, Streamed, Background, Cancelled string
		Conversations                                      []string
		Events                                             []string
		Deleted                                            int
	}
	node(t, modules, nil, &got, "testdata/openai-responses.cjs", f.http.URL+"/v1", "listener", "waiter")
	if got.Second != "Your name is Ada." || got.Retrieved != got.Second || got.Streamed != got.Second ||
		len(got.Conversations) != 2 || got.Conversations[0] == "" || got.Conversations[0] != got.Conversations[1] {
		t.Errorf("%+v", got)
	}
	want := "response.created response.in_progress response.output_item.added response.content_part.added response.output_text.delta " +
		"response.output_text.done response.content_part.done response.output_item.done response.completed"
	if strings.Join(got.Events, " ") != want {
		t.Errorf("the events: %s", strings.Join(got.Events, " "))
	}
	if got.Background != "in_progress" || got.Cancelled != "cancelled" || got.Deleted != 404 {
		t.Errorf("background %q, cancelled %q, deleted %d", got.Background, got.Cancelled, got.Deleted)
	}
	// The last response began a conversation of its own: nothing before it.
	if sent := strings.Join(m.sent(), "|"); sent != "system: Listen.|user: Forget me." {
		t.Errorf("the last response's run was sent %s", sent)
	}
}

// TestOpenAIAgentsSDK: the OpenAI Agents SDK for JS, on its default
// model (the Responses API), pointed at agentry: an agent whose model is
// an agentry agent runs, then runs again from its last response, and
// streams; each run is sent what was said before it.
func TestOpenAIAgentsSDK(t *testing.T) {
	modules := testdb.NPM(t, "@openai/agents")
	f := newFixture(t, Config{})
	m := f.serveListener(t)
	var got struct{ First, Second, Streamed, Final string }
	node(t, modules, []string{"OPENAI_BASE_URL=" + f.http.URL + "/v1", "OPENAI_API_KEY=none"}, &got, "testdata/openai-agents.cjs", "listener")
	if got.First != "Your name is Ada." || got.Second != "Your name is Ada." || got.Streamed != "Your name is Ada." || got.Final != "Your name is Ada." {
		t.Errorf("%+v", got)
	}
	if sent := strings.Join(m.sent(), "|"); sent != "system: Listen.|user: My name is Ada.|assistant: Your name is Ada.|user: What is my name?|assistant: Your name is Ada.|user: And again?" {
		t.Errorf("the last run was sent %s", sent)
	}
}

// TestOpenAIAgentsSDKTools: the OpenAI Agents SDK for JS on its default
// Responses model, with a function tool of its own, pointed at an agent
// that takes a caller's tools and instructions: the call is handed back,
// the SDK runs it, and the run goes on to its answer, the agent's
// instructions sent to the model; by default, chained and streamed.
func TestOpenAIAgentsSDKTools(t *testing.T) {
	modules := testdb.NPM(t, "@openai/agents")
	f, _ := forecasterFixture(t, Config{})
	var got struct {
		Plain, Chained, Streamed string
		Cities                   []string
	}
	node(t, modules, []string{"OPENAI_BASE_URL=" + f.http.URL + "/v1", "OPENAI_API_KEY=unused"}, &got, "testdata/openai-agents-tools.cjs", "forecaster")
	const results = "Results: add=5; get_weather=sunny in Oslo"
	want := results + " (brief)" // the instructions reached the model each time
	// The chained run's model was sent the first run's results too.
	if got.Plain != want || got.Chained != results+"; add=5; get_weather=sunny in Oslo (brief)" || got.Streamed != want || len(got.Cities) != 3 {
		t.Errorf("%+v; want %q each time (after the first's, chained), the tool run by the SDK thrice", got, want)
	}
}
