package mcp_test

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/agentry/agentry/agent"
	"github.com/agentry/agentry/event"
	"github.com/agentry/agentry/internal/testdb"
	"github.com/agentry/agentry/llm"
	"github.com/agentry/agentry/llm/scripted"
	"github.com/agentry/agentry/policy"
	"github.com/agentry/agentry/spec"
	"github.com/agentry/agentry/store"
	_ "github.com/agentry/agentry/store/sqlite"
)

// offered records the tools each model call was offered.
type offered struct {
	next  llm.Provider
	mu    sync.Mutex
	calls [][]string
}

func (o *offered) Generate(ctx context.Context, req *llm.Request) (*llm.Response, error) {
	var names []string
	for _, t := range req.Tools {
		names = append(names, t.Name)
	}
	o.mu.Lock()
	o.calls = append(o.calls, names)
	o.mu.Unlock()
	return o.next.Generate(ctx, req)
}

func scriptedModel(t *testing.T, turns ...scripted.Turn) *offered {
	t.Helper()
	s, err := scripted.New("mcp", turns...)
	if err != nil {
		t.Fatal(err)
	}
	return &offered{next: s.Model()}
}

func mcpAgent(t *testing.T, sp *spec.Spec, model llm.Provider) *agent.Agent {
	t.Helper()
	if sp.AgentName == "" {
		sp.AgentName, sp.Version, sp.SystemText = "mcp-user", "v1", "Use the tools."
	}
	a, err := agent.New(sp, agent.WithProvider(model, "scripted"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { a.Close() })
	return a
}

// An agent calls an MCP server's tools like any other: offered with their
// schemas under their model names, their results as observations, their
// progress as tool_progress events; a server that adds a tool offers it
// from the next turn on.
func TestAgentUsesMCPTools(t *testing.T) {
	t.Setenv("AGENTRY_TEST_GIVEN", "x")
	srv := stdioServer("serve")
	srv.MediaDir = t.TempDir()
	model := scriptedModel(t,
		// slow alone: a server's log message reaches a call's events only
		// when no other call of the server is in flight.
		scripted.Turn{ToolCalls: []scripted.ToolCall{{Name: "slow", Arguments: map[string]any{}}}},
		scripted.Turn{ToolCalls: []scripted.ToolCall{{Name: "get-sum", Arguments: map[string]int{"a": 2, "b": 3}},
			{Name: "grow", Arguments: map[string]any{}}}},
		scripted.Turn{ToolCalls: []scripted.ToolCall{{Name: "late", Arguments: map[string]any{}}}},
		scripted.Turn{Content: "5, done, late but here"})
	a := mcpAgent(t, &spec.Spec{MCPServers: []spec.MCPServer{srv},
		Tools: []string{"mcp:local/*"}}, model)

	var mu sync.Mutex
	var progress []event.Progress
	res, err := a.Run(context.Background(), nil, agent.WithEvents(func(e event.Event) {
		if e.Type == event.ToolProgress && e.Tool.Name == "slow" {
			mu.Lock()
			progress = append(progress, *e.Progress)
			mu.Unlock()
		}
	}))
	if err != nil {
		t.Fatal(err)
	}
	if res.Result != "5, done, late but here" {
		t.Fatalf("result %v", res.Result)
	}
	obs := map[string]string{}
	for _, s := range res.Steps {
		if s.Action != nil {
			obs[s.Action.Tool] = s.Observation
		}
	}
	if obs["get-sum"] != `"The sum of 2 and 3 is 5."` || obs["slow"] != `"done"` || obs["late"] != `"late but here"` {
		t.Errorf("observations: %v", obs)
	}
	if len(progress) != 4 || progress[3].Progress != 3 || progress[0].Level != "info" {
		t.Errorf("progress events: %+v", progress)
	}
	// "late" was not there when the agent was built: the list_changed
	// after "grow" made the next turn offer it.
	if len(model.calls) != 4 || slices.Contains(model.calls[1], "late") || !slices.Contains(model.calls[2], "late") {
		t.Errorf("tools offered per call: %v", model.calls)
	}
}

// Policy applies to MCP tools: a denied tool is refused before it reaches
// the server, and a tool under approval pauses the run.
func TestPolicyOnMCPTools(t *testing.T) {
	srv := httpServer(t, false)
	t.Setenv("AGENTRY_TEST_TOKEN", "tok-123")
	model := scriptedModel(t,
		scripted.Turn{ToolCalls: []scripted.ToolCall{{Name: "delete", Arguments: map[string]any{}}}},
		scripted.Turn{ToolCalls: []scripted.ToolCall{{Name: "pay", Arguments: map[string]any{}}}},
		scripted.Turn{Content: "unreachable"})
	a := mcpAgent(t, &spec.Spec{MCPServers: []spec.MCPServer{srv}, Tools: []string{"mcp:remote/*"},
		Policy: &policy.Policy{Tools: policy.ToolRules{Deny: []string{"delete"}}, Approval: policy.Approval{Tools: []string{"pay"}}}}, model)
	res, err := a.Run(context.Background(), nil)
	if !errors.Is(err, agent.ErrAwaitingApproval) {
		t.Fatal(err)
	}
	if res.TerminateReason != agent.ReasonAwaitingApproval {
		t.Fatalf("terminate reason %s, want awaiting_approval", res.TerminateReason)
	}
	if len(res.Steps) == 0 || !strings.Contains(res.Steps[0].Observation, "tools.deny") {
		t.Errorf("the denied call: %+v", res.Steps)
	}
}

// A hostile server that was handed a secret (its token, from the
// environment) says it back in its result, a log message and its
// progress: the run's events, Result and stored log hold it redacted.
func TestMCPSecretsRedacted(t *testing.T) {
	const secret = "sk-live-Canary0123456789abcdef"
	t.Setenv("AGENTRY_TEST_API_KEY", secret)
	srv := stdioServer("serve")
	srv.Env["GIVEN"] = "${env:AGENTRY_TEST_API_KEY}"
	model := scriptedModel(t, scripted.Turn{ToolCalls: []scripted.ToolCall{{Name: "leak", Arguments: map[string]any{}}}},
		scripted.Turn{Content: "Done."})
	a := mcpAgent(t, &spec.Spec{MCPServers: []spec.MCPServer{srv}, Tools: []string{"mcp:local/leak"}}, model)
	var mu sync.Mutex
	var seen []string
	var progress int
	st, err := store.Open(context.Background(), testdb.SQLite(t))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	res, err := a.Run(context.Background(), nil, agent.WithStore(st), agent.WithEvents(func(e event.Event) {
		b, _ := json.Marshal(e)
		mu.Lock()
		seen = append(seen, string(b))
		if e.Type == event.ToolProgress {
			progress++
		}
		mu.Unlock()
	}))
	if err != nil {
		t.Fatal(err)
	}
	whole, _ := json.Marshal(res)
	records, err := st.Records(context.Background(), res.ID, 0)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range records {
		seen = append(seen, string(r.Data))
	}
	seen = append(seen, string(whole))
	mu.Lock()
	defer mu.Unlock()
	if progress != 2 {
		t.Errorf("%d tool_progress events, want the log message and the progress", progress)
	}
	for _, s := range seen {
		if strings.Contains(s, secret) || strings.Contains(s, "Canary0123456789") {
			t.Fatalf("the secret leaked: %s", s)
		}
	}
	if !strings.Contains(res.Steps[0].Observation, "[REDACTED") {
		t.Errorf("observation %q", res.Steps[0].Observation)
	}
}

// The agent's tool timeouts bound an MCP call: a call that outlives its
// timeout is cut off (the server is told it is cancelled), and as the
// tool is non-idempotent (no annotations) its outcome is unknown: it is
// not repeated.
func TestMCPToolTimeout(t *testing.T) {
	t.Setenv("AGENTRY_TEST_GIVEN", "x")
	model := scriptedModel(t, scripted.Turn{ToolCalls: []scripted.ToolCall{{Name: "wait", Arguments: map[string]any{}}}},
		scripted.Turn{Content: "It took too long."})
	a := mcpAgent(t, &spec.Spec{MCPServers: []spec.MCPServer{stdioServer("serve")}, Tools: []string{"mcp:local/wait"},
		Limits: spec.Limits{ToolTimeoutsMS: map[string]int64{"wait": 100}}}, model)
	res, err := a.Run(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Steps) != 1 || !strings.Contains(res.Steps[0].Observation, "unknown_outcome") || res.Steps[0].Action.Attempts != 1 {
		t.Errorf("steps %+v", res.Steps)
	}
}

// A tools entry naming a tool the server lacks, or a server that does not
// start, fails the agent's build with a problem naming them.
func TestMCPBuildProblems(t *testing.T) {
	model := scriptedModel(t, scripted.Turn{Content: "x"})
	for _, tc := range []struct {
		name string
		sp   spec.Spec
		want string
	}{
		{"unknown tool", spec.Spec{MCPServers: []spec.MCPServer{stdioServer("serve")}, Tools: []string{"mcp:local/teleport"}},
			`server local has no tool "teleport" (it has: crash, delete, env, fail, get-sum, grow, image, leak,`},
		{"server fails", spec.Spec{MCPServers: []spec.MCPServer{stdioServer("exit")}, Tools: []string{"mcp:local/*"}},
			"mcp server local: start"},
		{"two servers, one name", spec.Spec{MCPServers: []spec.MCPServer{stdioServer("serve"), func() spec.MCPServer {
			s := stdioServer("serve")
			s.Name = "other"
			return s
		}()}, Tools: []string{"mcp:local/pay", "mcp:other/pay"}}, `two tools are named "pay"`},
		{"undeclared server", spec.Spec{Tools: []string{"mcp:nowhere/x"}}, "the spec has no mcp_servers"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv("AGENTRY_TEST_GIVEN", "x")
			sp := tc.sp
			sp.AgentName, sp.Version = "bad", "v1"
			_, err := agent.New(&sp, agent.WithProvider(model, "scripted"))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("got %v, want %q", err, tc.want)
			}
		})
	}
}

// TestCreatedByMCP attacks the creation rules through a real MCP
// server: a caller who may not create the server does not start it (an
// admin's same spec does), and a tool the server adds later that the
// caller may not create is never offered, nor reaches the server when
// the model names it anyway.
func TestCreatedByMCP(t *testing.T) {
	builder := &policy.Principal{UserID: "ann", Roles: []string{"builder"}}
	t.Run("server not started", func(t *testing.T) {
		t.Setenv("AGENTRY_TEST_GIVEN", "x")
		marker := filepath.Join(t.TempDir(), "started")
		srv := stdioServer("serve")
		srv.Command, srv.Args = "/bin/sh", []string{"-c", `touch "$1" && exec "$0"`, os.Args[0], marker}
		sp := &spec.Spec{AgentName: "mcp-user", Version: "v1", SystemText: "Use the tools.", MCPServers: []spec.MCPServer{srv}, Tools: []string{"mcp:local/*"}}
		rules := policy.Creation{"mcp:*": {"admin"}}
		model := scriptedModel(t, scripted.Turn{Content: "done"})
		_, err := agent.New(sp, agent.WithProvider(model, "scripted"), agent.CreatedBy(builder, rules))
		if !errors.Is(err, agent.ErrPolicyViolation) || !strings.Contains(err.Error(), `may not create mcp:/bin/sh -c touch "$1" && exec "$0" `) ||
			!strings.Contains(err.Error(), `"mcp:*" is for the roles admin`) {
			t.Fatalf("New: %v", err)
		}
		if _, err := os.Stat(marker); err == nil {
			t.Fatal("the refused server was started")
		}
		a, err := agent.New(sp, agent.WithProvider(model, "scripted"), agent.CreatedBy(&policy.Principal{Roles: []string{"admin"}}, rules))
		if err != nil {
			t.Fatal(err)
		}
		a.Close()
		if _, err := os.Stat(marker); err != nil {
			t.Errorf("the admin's server did not start: %v", err)
		}
	})
	t.Run("a prefix does not rename a tool out of reach", func(t *testing.T) {
		t.Setenv("AGENTRY_TEST_GIVEN", "x")
		srv := stdioServer("serve")
		srv.Prefix = "harmless_"
		sp := &spec.Spec{AgentName: "mcp-user", Version: "v1", SystemText: "Use the tools.", MCPServers: []spec.MCPServer{srv}, Tools: []string{"mcp:local/*"}}
		_, err := agent.New(sp, agent.WithProvider(scriptedModel(t, scripted.Turn{Content: "done"}), "scripted"),
			agent.CreatedBy(builder, policy.Creation{"tool:grow": {"admin"}}))
		if !errors.Is(err, agent.ErrPolicyViolation) || !strings.Contains(err.Error(), "may not create tool:grow") {
			t.Errorf("New: %v", err)
		}
	})
	t.Run("tool added later", func(t *testing.T) {
		t.Setenv("AGENTRY_TEST_GIVEN", "x")
		model := scriptedModel(t,
			scripted.Turn{ToolCalls: []scripted.ToolCall{{Name: "grow", Arguments: map[string]any{}}}},
			scripted.Turn{ToolCalls: []scripted.ToolCall{{Name: "late", Arguments: map[string]any{}}}},
			scripted.Turn{Content: "done"})
		sp := &spec.Spec{AgentName: "mcp-user", Version: "v1", SystemText: "Use the tools.", MCPServers: []spec.MCPServer{stdioServer("serve")}, Tools: []string{"mcp:local/*"}}
		var logged strings.Builder
		var mu sync.Mutex
		logger := slog.New(slog.NewTextHandler(writerFunc(func(p []byte) (int, error) {
			mu.Lock()
			defer mu.Unlock()
			return logged.Write(p)
		}), nil))
		a, err := agent.New(sp, agent.WithProvider(model, "scripted"), agent.WithLogger(logger),
			agent.CreatedBy(builder, policy.Creation{"tool:late": {"admin"}}))
		if err != nil {
			t.Fatal(err)
		}
		defer a.Close()
		res, err := a.Run(context.Background(), nil)
		if err != nil {
			t.Fatal(err)
		}
		for i, names := range model.calls {
			if slices.Contains(names, "late") {
				t.Errorf("call %d offered late: %v", i, names)
			}
		}
		mu.Lock()
		if !strings.Contains(logged.String(), `msg="tool left out: the agent's creator may not create it" set=local name=late`) {
			t.Errorf("the server's new tool was not seen and left out:\n%s", logged.String())
		}
		mu.Unlock()
		if obs := res.Steps[1].Observation; strings.Contains(obs, "late but here") || !strings.Contains(obs, `there is no tool \"late\"`) {
			t.Errorf("late: %s", obs)
		}
	})
}

// writerFunc is an io.Writer made of a function.
type writerFunc func(p []byte) (int, error)

func (f writerFunc) Write(p []byte) (int, error) { return f(p) }
