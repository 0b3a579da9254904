package server

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/agentry/agentry/agent"
	"github.com/agentry/agentry/llm/scripted"
	"github.com/agentry/agentry/prompt"
	"github.com/agentry/agentry/spec"
	"github.com/agentry/agentry/store"
)

// bearer adds a key to each request.
type bearer struct{ key string }

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	if b.key != "" {
		r.Header.Set("Authorization", "Bearer "+b.key)
	}
	return http.DefaultTransport.RoundTrip(r)
}

// mcpClient connects the SDK's client to the fixture's POST /mcp with key.
func mcpClient(t *testing.T, f *fixture, key string, progress func(*sdk.ProgressNotificationParams)) (*sdk.ClientSession, error) {
	t.Helper()
	opts := &sdk.ClientOptions{}
	if progress != nil {
		opts.ProgressNotificationHandler = func(_ context.Context, r *sdk.ProgressNotificationClientRequest) { progress(r.Params) }
	}
	c := sdk.NewClient(&sdk.Implementation{Name: "test", Version: "1"}, opts)
	cs, err := c.Connect(context.Background(), &sdk.StreamableClientTransport{Endpoint: f.http.URL + "/mcp",
		HTTPClient: &http.Client{Transport: bearer{key}}, MaxRetries: -1}, nil)
	if err == nil {
		t.Cleanup(func() { cs.Close() })
	}
	return cs, err
}

func mcpFixture(t *testing.T) *fixture {
	t.Helper()
	keys := []Key{{Name: "rui", SHA256: HashKey("run-key"), Role: RoleRunner}, {Name: "val", SHA256: HashKey("view-key"), Role: RoleViewer}}
	f := newFixture(t, Config{Keys: keys, Prompts: prompt.Fixed(prompt.Template{ID: "triage", Name: "Triage", Version: "v2",
		Text: "Sort the ticket of ${customer}: ${ticket}", RequiredVars: []string{"ticket"}})})
	script, _ := scripted.New("writer", scripted.Turn{Content: `{"city": "Lisbon", "days": 3}`})
	writer, err := agent.New(&spec.Spec{AgentName: "planner", Version: "v1", Mode: spec.ModeWriter, SystemText: "You plan.", PurposeText: "Plan a trip.",
		InputKeys: []string{"city"}, OutputSchema: json.RawMessage(`{"type": "object", "properties": {"city": {"type": "string"}, "days": {"type": "integer"}}, "required": ["city", "days"]}`)},
		agent.WithProvider(script.Model(), "scripted"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { writer.Close() })
	if err := f.srv.cfg.Agents.Register(writer); err != nil {
		t.Fatal(err)
	}
	return f
}

// The official MCP Go SDK's client against POST /mcp: each served agent
// is a tool with its input schema (and output schema), annotations from
// its tools; a call runs the agent as a stored run, with progress, its
// answer as text or structured content; templates are prompts.
func TestMCPServer(t *testing.T) {
	f := mcpFixture(t)
	var mu sync.Mutex
	var progress []string
	cs, err := mcpClient(t, f, "run-key", func(p *sdk.ProgressNotificationParams) {
		mu.Lock()
		progress = append(progress, fmt.Sprintf("%v %s", p.Progress, p.Message))
		mu.Unlock()
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	tools, err := cs.ListTools(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	byName := map[string]*sdk.Tool{}
	for _, tt := range tools.Tools {
		byName[tt.Name] = tt
	}
	if len(byName) != 3 || byName["greeter"] == nil || byName["waiter"] == nil || byName["planner"] == nil {
		t.Fatalf("tools %v", byName)
	}
	if in, _ := json.Marshal(byName["greeter"].InputSchema); !strings.Contains(string(in), `"required":["task"]`) {
		t.Errorf("greeter's input schema %s", in)
	}
	if in, _ := json.Marshal(byName["planner"].InputSchema); !strings.Contains(string(in), `"required":["city"]`) || byName["planner"].OutputSchema == nil {
		t.Errorf("planner: input %s, output %v", in, byName["planner"].OutputSchema)
	}
	if a := byName["greeter"].Annotations; a == nil || a.ReadOnlyHint || !*a.OpenWorldHint {
		t.Errorf("greeter's annotations %+v (it sets a key)", a)
	}
	if a := byName["waiter"].Annotations; a == nil || !a.ReadOnlyHint || *a.DestructiveHint {
		t.Errorf("waiter's annotations %+v (it has no tools)", a)
	}

	params := &sdk.CallToolParams{Name: "greeter", Arguments: map[string]any{"task": "Greet Ada"}}
	params.SetProgressToken("p1")
	res, err := cs.CallTool(ctx, params)
	if err != nil || res.IsError || len(res.Content) != 1 || res.Content[0].(*sdk.TextContent).Text != "Hello, Ada." {
		t.Fatalf("greeter: %+v, %v", res, err)
	}
	id, _ := res.Meta["agentry/run_id"].(string)
	run, err := f.st.Get(ctx, id)
	if err != nil || run.Status != store.Completed || run.Name != "greeter" {
		t.Errorf("the stored run: %+v, %v", run, err)
	}
	waitFor(t, func() bool { mu.Lock(); defer mu.Unlock(); return len(progress) == 3 })
	if want := "1 turn 1|2 turn 1: calling kv_set|3 turn 2"; strings.Join(progress, "|") != want {
		t.Errorf("progress %q, want %q", progress, want)
	}

	res, err = cs.CallTool(ctx, &sdk.CallToolParams{Name: "planner", Arguments: map[string]any{"city": "Lisbon"}})
	if err != nil || res.IsError {
		t.Fatalf("planner: %+v, %v", res, err)
	}
	if got, _ := json.Marshal(res.StructuredContent); string(got) != `{"city":"Lisbon","days":3}` {
		t.Errorf("structured content %s", got)
	}

	res, err = cs.CallTool(ctx, &sdk.CallToolParams{Name: "planner", Arguments: map[string]any{"town": "Porto"}})
	if err != nil || !res.IsError || !strings.Contains(res.Content[0].(*sdk.TextContent).Text, "city") {
		t.Errorf("bad input: %+v, %v", res, err)
	}

	prompts, err := cs.ListPrompts(ctx, nil)
	if err != nil || len(prompts.Prompts) != 1 || prompts.Prompts[0].Name != "triage" || len(prompts.Prompts[0].Arguments) != 2 {
		t.Fatalf("prompts: %+v, %v", prompts, err)
	}
	got, err := cs.GetPrompt(ctx, &sdk.GetPromptParams{Name: "triage", Arguments: map[string]string{"customer": "Ada", "ticket": "refund"}})
	if err != nil || got.Messages[0].Content.(*sdk.TextContent).Text != "Sort the ticket of Ada: refund" {
		t.Errorf("prompt: %+v, %v", got, err)
	}
	if _, err := cs.GetPrompt(ctx, &sdk.GetPromptParams{Name: "triage", Arguments: map[string]string{"customer": "Ada"}}); err == nil || !strings.Contains(err.Error(), "ticket") {
		t.Errorf("a missing argument: %v", err)
	}
}

// The MCP server's lists follow what is served: an agent registered, a
// newer version of one (its schema offered), a template added to the
// prompt store.
func TestMCPServerListsFollow(t *testing.T) {
	dir := t.TempDir()
	f := newFixture(t, Config{Prompts: prompt.Dir(dir)})
	cs, err := mcpClient(t, f, "", nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	names := func() map[string]string {
		tools, err := cs.ListTools(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		out := map[string]string{}
		for _, tt := range tools.Tools {
			in, _ := json.Marshal(tt.InputSchema)
			out[tt.Name] = tt.Title + " " + string(in)
		}
		return out
	}
	if got := names(); len(got) != 2 {
		t.Fatalf("tools %v", got)
	}
	v2, err := agent.New(&spec.Spec{AgentName: "greeter", Version: "v2", SystemText: "Greet.", InputKeys: []string{"name"}},
		agent.WithProvider(held{f.release}, "test"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { v2.Close() })
	if err := f.srv.cfg.Agents.Register(v2); err != nil {
		t.Fatal(err)
	}
	if got := names()["greeter"]; !strings.HasPrefix(got, "greeter v2 ") || !strings.Contains(got, `"required":["name"]`) {
		t.Errorf("greeter after v2: %s", got)
	}
	if prompts, err := cs.ListPrompts(ctx, nil); err != nil || len(prompts.Prompts) != 0 {
		t.Fatalf("prompts %+v, %v", prompts, err)
	}
	os.MkdirAll(filepath.Join(dir, "hello"), 0o700)
	writeFile(t, filepath.Join(dir, "hello", "v1.json"), `{"id": "hello", "version": "v1", "text": "Hello ${name}."}`)
	if prompts, err := cs.ListPrompts(ctx, nil); err != nil || len(prompts.Prompts) != 1 || prompts.Prompts[0].Name != "hello" {
		t.Errorf("prompts after a template was added: %+v, %v", prompts, err)
	}
}

// POST /mcp is behind the server's keys: none is 401, a viewer's 403.
func TestMCPServerKeys(t *testing.T) {
	f := mcpFixture(t)
	for _, tc := range []struct{ key, want string }{{"", "401"}, {"view-key", "403"}, {"wrong", "401"}} {
		if _, err := mcpClient(t, f, tc.key, nil); err == nil || !strings.Contains(err.Error(), tc.want) && !strings.Contains(err.Error(), http.StatusText(map[string]int{"401": 401, "403": 403}[tc.want])) {
			t.Errorf("key %q: %v, want %s", tc.key, err, tc.want)
		}
	}
}

// A client that cancels its call aborts the run.
func TestMCPServerCancel(t *testing.T) {
	f := mcpFixture(t)
	cs, err := mcpClient(t, f, "run-key", nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		_, err := cs.CallTool(ctx, &sdk.CallToolParams{Name: "waiter", Arguments: map[string]any{"task": "wait"}})
		done <- err
	}()
	var id string
	waitFor(t, func() bool {
		runs, _ := f.st.List(context.Background(), store.Filter{Status: store.Running})
		if len(runs) == 1 {
			id = runs[0].ID
		}
		return id != ""
	})
	cancel()
	if err := <-done; err == nil {
		t.Error("the cancelled call returned no error")
	}
	waitFor(t, func() bool {
		run, err := f.st.Get(context.Background(), id)
		return err == nil && run.Status != store.Running
	})
	if run, _ := f.st.Get(context.Background(), id); run.Status != store.Aborted {
		t.Errorf("the run is %s, want aborted", run.Status)
	}
}

// A keyless server's POST /mcp refuses what a web page could send it: a
// call of a tool from another site, or through a DNS-rebound name.
func TestMCPServerCrossSite(t *testing.T) {
	f := newFixture(t, Config{})
	call := `{"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "waiter", "arguments": {"task": "x"}}}`
	list := `{"jsonrpc": "2.0", "id": 1, "method": "tools/list"}`
	accept := "application/json, text/event-stream"
	for _, tc := range []struct {
		name, body string
		headers    map[string]string
		status     int
	}{
		{"another site's page", call, map[string]string{"Accept": accept, "Origin": "https://evil.example"}, 403},
		{"a cross-site fetch", call, map[string]string{"Accept": accept, "Sec-Fetch-Site": "cross-site"}, 403},
		{"DNS rebinding", call, map[string]string{"Accept": accept, "Host": "attacker.example"}, 403},
		{"a form post", call, map[string]string{"Accept": accept, "Content-Type": "text/plain"}, 415},
		{"a local client", list, map[string]string{"Accept": accept, "MCP-Protocol-Version": "2025-11-25"}, 200},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if code, body := post(t, f.http.URL+"/mcp", tc.body, tc.headers); code != tc.status {
				t.Errorf("%d, want %d: %v", code, tc.status, body)
			}
		})
	}
	runs, _ := f.st.List(context.Background(), store.Filter{})
	if len(runs) != 0 {
		t.Errorf("%d runs were started", len(runs))
	}
	// Stateless: no stream to GET, no session to DELETE.
	for _, method := range []string{"GET", "DELETE"} {
		if code, body := f.do(t, method, "/mcp", "", ""); code != http.StatusMethodNotAllowed {
			t.Errorf("%s /mcp: %d %v", method, code, body)
		}
	}
}

// TestMCPSessions: a client that initializes (protocol 2025-11-25) gets a
// session id that names no state: another server accepts it as this one
// does; a request that is not an initialize gets none; a body over the
// server's bound is still refused as such.
func TestMCPSessions(t *testing.T) {
	f, other := mcpFixture(t), mcpFixture(t)
	post := func(f *fixture, session, body string) *http.Response {
		t.Helper()
		req, _ := http.NewRequest("POST", f.http.URL+"/mcp", strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer run-key")
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		req.Header.Set("Mcp-Protocol-Version", "2025-11-25")
		if session != "" {
			req.Header.Set("Mcp-Session-Id", session)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp
	}
	init := post(f, "", `{"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}}`)
	session := init.Header.Get("Mcp-Session-Id")
	if init.StatusCode != 200 || !strings.HasPrefix(session, "mcp_") {
		t.Fatalf("initialize: %d, session %q", init.StatusCode, session)
	}
	list := `{"jsonrpc": "2.0", "id": 2, "method": "tools/list"}`
	for name, srv := range map[string]*fixture{"this server": f, "another": other} {
		if resp := post(srv, session, list); resp.StatusCode != 200 || resp.Header.Get("Mcp-Session-Id") != "" {
			t.Errorf("%s: tools/list in the session: %d %v", name, resp.StatusCode, resp.Header)
		}
	}
	if resp := post(f, "", list); resp.Header.Get("Mcp-Session-Id") != "" {
		t.Errorf("a request that is not an initialize got a session %q", resp.Header.Get("Mcp-Session-Id"))
	}
	big := `{"jsonrpc": "2.0", "id": 3, "method": "initialize", "params": {"pad": "` + strings.Repeat("x", int(f.srv.cfg.MaxBody)) + `"}}`
	if resp := post(f, "", big); resp.StatusCode != http.StatusRequestEntityTooLarge {
		t.Errorf("a body over the bound: %d", resp.StatusCode)
	}
}
