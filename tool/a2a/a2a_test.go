package a2a_test

import (
	"context"
	"io"
	"iter"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	sdk "github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2asrv"
	"go.uber.org/goleak"

	"github.com/agentry/agentry/agent"
	"github.com/agentry/agentry/llm/scripted"
	"github.com/agentry/agentry/spec"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// echo is an A2A agent built from the SDK: it answers "echo: TEXT" as
// its task's artifact; "fail" fails the task, "ask" asks for input.
type echo struct{}

func (echo) Execute(_ context.Context, ec *a2asrv.ExecutorContext) iter.Seq2[sdk.Event, error] {
	return func(yield func(sdk.Event, error) bool) {
		text := ec.Message.Parts[0].Text()
		if !yield(sdk.NewSubmittedTask(ec, ec.Message), nil) {
			return
		}
		switch text {
		case "fail":
			yield(sdk.NewStatusUpdateEvent(ec, sdk.TaskStateFailed, sdk.NewMessageForTask(sdk.MessageRoleAgent, ec, sdk.NewTextPart("the disk is full"))), nil)
		case "ask":
			yield(sdk.NewStatusUpdateEvent(ec, sdk.TaskStateInputRequired, sdk.NewMessageForTask(sdk.MessageRoleAgent, ec, sdk.NewTextPart("which disk?"))), nil)
		default:
			if yield(sdk.NewArtifactEvent(ec, sdk.NewTextPart("echo: "+text), sdk.NewDataPart(map[string]any{"n": 1})), nil) {
				yield(sdk.NewStatusUpdateEvent(ec, sdk.TaskStateCompleted, nil), nil)
			}
		}
	}
}

func (echo) Cancel(_ context.Context, ec *a2asrv.ExecutorContext) iter.Seq2[sdk.Event, error] {
	return func(yield func(sdk.Event, error) bool) {
		yield(sdk.NewStatusUpdateEvent(ec, sdk.TaskStateCanceled, nil), nil)
	}
}

// remote serves the echo agent, its card at the well-known path.
func remote(t *testing.T) *httptest.Server {
	t.Helper()
	mux := http.NewServeMux()
	srv := httptest.NewServer(mux)
	card := &sdk.AgentCard{Name: "Echo Agent", Description: "Says back what it is told.", Version: "1",
		SupportedInterfaces: []*sdk.AgentInterface{sdk.NewAgentInterface(srv.URL+"/invoke", sdk.TransportProtocolJSONRPC)},
		DefaultInputModes:   []string{"text"}, DefaultOutputModes: []string{"text"},
		Skills: []sdk.AgentSkill{{ID: "echo", Name: "echo", Description: "Echoes.", Tags: []string{"echo"}}}}
	mux.Handle("/invoke", a2asrv.NewJSONRPCHandler(a2asrv.NewHandler(echo{})))
	mux.Handle(a2asrv.WellKnownAgentCardPath, a2asrv.NewStaticAgentCardHandler(card))
	t.Cleanup(srv.Close)
	return srv
}

// caller is an agent whose model calls the tool once with message, then
// answers.
func caller(t *testing.T, entry, toolName, message string) (*agent.Agent, error) {
	t.Helper()
	script, err := scripted.New("caller",
		scripted.Turn{ToolCalls: []scripted.ToolCall{{Name: toolName, Arguments: map[string]any{"message": message}}}},
		scripted.Turn{Content: "Done."})
	if err != nil {
		t.Fatal(err)
	}
	return agent.New(&spec.Spec{AgentName: "caller", Version: "v1", SystemText: "Ask the echo agent.", Tools: []string{entry}},
		agent.WithProvider(script.Model(), "scripted"))
}

// observation runs a and returns the tool call's observation.
func observation(t *testing.T, a *agent.Agent) string {
	t.Helper()
	res, err := a.Run(context.Background(), map[string]any{"task": "go"})
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range res.Steps {
		if s.Observation != "" {
			return s.Observation
		}
	}
	t.Fatalf("no observation in %+v", res.Steps)
	return ""
}

// TestCallsRemoteAgent: an agentry agent calls an A2A agent built from
// the SDK through "a2a:URL" (its base URL, or its card's): the tool's
// name and description are the card's; the observation holds the
// remote answer, its text and its data.
func TestCallsRemoteAgent(t *testing.T) {
	srv := remote(t)
	for _, entry := range []string{"a2a:" + srv.URL, "a2a:" + srv.URL + "/.well-known/agent-card.json"} {
		a, err := caller(t, entry, "Echo_Agent", "hello")
		if err != nil {
			t.Fatal(err)
		}
		infos := a.Tools()
		if len(infos) != 1 || infos[0].Name != "Echo_Agent" || !strings.Contains(infos[0].Description, "Says back") {
			t.Errorf("%s: tools %+v", entry, infos)
		}
		obs := observation(t, a)
		if !strings.Contains(obs, `"state":"completed"`) || !strings.Contains(obs, `"answer":"echo: hello"`) || !strings.Contains(obs, `"n":1`) {
			t.Errorf("%s: observation %s", entry, obs)
		}
		a.Close()
	}
}

// TestRemoteFailures: a remote task that fails, or asks for input, is
// an error observation saying so.
func TestRemoteFailures(t *testing.T) {
	srv := remote(t)
	for msg, want := range map[string]string{"fail": "ended failed: the disk is full", "ask": "asks for more input, which this tool does not give: which disk?"} {
		a, err := caller(t, "a2a:"+srv.URL, "Echo_Agent", msg)
		if err != nil {
			t.Fatal(err)
		}
		if obs := observation(t, a); !strings.Contains(obs, want) || !strings.Contains(obs, "Echo Agent") {
			t.Errorf("%s: observation %s", msg, obs)
		}
		a.Close()
	}
}

// TestBuildErrors: an unreachable agent fails the build, naming its
// URL; a URL that is not http or https fails the spec's check.
func TestBuildErrors(t *testing.T) {
	srv := httptest.NewServer(http.NotFoundHandler())
	gone := srv.URL
	srv.Close()
	if _, err := caller(t, "a2a:"+gone, "x", "hi"); err == nil || !strings.Contains(err.Error(), gone) {
		t.Errorf("an unreachable agent: %v", err)
	}
	for _, bad := range []string{"a2a:ftp://host/agent", "a2a:not a url", "a2a:/relative"} {
		sp := &spec.Spec{AgentName: "caller", Version: "v1", SystemText: "x", Tools: []string{bad}}
		if err := sp.Check(); err == nil || !strings.Contains(err.Error(), bad) {
			t.Errorf("%s: %v", bad, err)
		}
	}
}

// An agent behind a key: the spec's a2a_agents entry sends the key (from
// the environment) with each request; without it the agent is refused at
// build, naming the URL.
func TestKeyedRemoteAgent(t *testing.T) {
	open := remote(t)
	keyed := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer k-123" {
			http.Error(w, "a key, please", http.StatusUnauthorized)
			return
		}
		// The remote's card names its own URL: proxy to the open server.
		r2 := r.Clone(r.Context())
		r2.URL.Scheme, r2.URL.Host, r2.RequestURI = "http", strings.TrimPrefix(open.URL, "http://"), ""
		resp, err := http.DefaultTransport.RoundTrip(r2)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadGateway)
			return
		}
		defer resp.Body.Close()
		w.Header().Set("Content-Type", resp.Header.Get("Content-Type"))
		w.WriteHeader(resp.StatusCode)
		io.Copy(w, resp.Body)
	}))
	t.Cleanup(keyed.Close)
	if _, err := caller(t, "a2a:"+keyed.URL, "Echo_Agent", "hi"); err == nil || !strings.Contains(err.Error(), keyed.URL) {
		t.Errorf("without the key: %v", err)
	}
	t.Setenv("AGENTRY_TEST_A2A_KEY", "k-123")
	script, _ := scripted.New("caller", scripted.Turn{Content: "Done."})
	a, err := agent.New(&spec.Spec{AgentName: "caller", Version: "v1", SystemText: "Ask.", Tools: []string{"a2a:" + keyed.URL},
		A2AAgents: []spec.A2AAgent{{URL: keyed.URL, Headers: map[string]string{"Authorization": "Bearer ${env:AGENTRY_TEST_A2A_KEY}"}}}},
		agent.WithProvider(script.Model(), "scripted"))
	if err != nil {
		t.Fatalf("with the key: %v", err)
	}
	a.Close()
	_, err = agent.New(&spec.Spec{AgentName: "caller", Version: "v1", SystemText: "Ask.", Tools: []string{"a2a:" + keyed.URL},
		A2AAgents: []spec.A2AAgent{{URL: keyed.URL, Headers: map[string]string{"Authorization": "Bearer ${env:AGENTRY_TEST_UNSET_KEY}"}}}},
		agent.WithProvider(script.Model(), "scripted"))
	if err == nil || !strings.Contains(err.Error(), "AGENTRY_TEST_UNSET_KEY is not set") {
		t.Errorf("an unset variable: %v", err)
	}
}

// slow is an A2A agent that works until its task is canceled.
type slow struct{ canceled chan string }

func (s slow) Execute(ctx context.Context, ec *a2asrv.ExecutorContext) iter.Seq2[sdk.Event, error] {
	return func(yield func(sdk.Event, error) bool) {
		if !yield(sdk.NewSubmittedTask(ec, ec.Message), nil) || !yield(sdk.NewStatusUpdateEvent(ec, sdk.TaskStateWorking, nil), nil) {
			return
		}
		<-ctx.Done()
	}
}

func (s slow) Cancel(_ context.Context, ec *a2asrv.ExecutorContext) iter.Seq2[sdk.Event, error] {
	return func(yield func(sdk.Event, error) bool) {
		s.canceled <- string(ec.TaskID)
		yield(sdk.NewStatusUpdateEvent(ec, sdk.TaskStateCanceled, nil), nil)
	}
}

// A call cut off by the agent's tool timeout cancels the remote task.
func TestTimeoutCancelsRemoteTask(t *testing.T) {
	mux := http.NewServeMux()
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	s := slow{canceled: make(chan string, 1)}
	card := &sdk.AgentCard{Name: "Slow Agent", Description: "Takes its time.", Version: "1",
		SupportedInterfaces: []*sdk.AgentInterface{sdk.NewAgentInterface(srv.URL+"/invoke", sdk.TransportProtocolJSONRPC)},
		DefaultInputModes:   []string{"text"}, DefaultOutputModes: []string{"text"}}
	mux.Handle("/invoke", a2asrv.NewJSONRPCHandler(a2asrv.NewHandler(s)))
	mux.Handle(a2asrv.WellKnownAgentCardPath, a2asrv.NewStaticAgentCardHandler(card))
	script, _ := scripted.New("caller", scripted.Turn{ToolCalls: []scripted.ToolCall{{Name: "Slow_Agent", Arguments: map[string]any{"message": "work"}}}},
		scripted.Turn{Content: "Gave up."})
	a, err := agent.New(&spec.Spec{AgentName: "caller", Version: "v1", SystemText: "Ask.", Tools: []string{"a2a:" + srv.URL},
		Limits: spec.Limits{ToolTimeoutsMS: map[string]int64{"Slow_Agent": 300}}}, agent.WithProvider(script.Model(), "scripted"))
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	if obs := observation(t, a); !strings.Contains(obs, "unknown_outcome") {
		t.Errorf("observation %s", obs)
	}
	select {
	case id := <-s.canceled:
		if id == "" {
			t.Error("a cancel of no task")
		}
	case <-time.After(20 * time.Second):
		t.Fatal("the remote task was not canceled")
	}
}
