package server

import (
	"context"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/agentry/agentry/agent"
	"github.com/agentry/agentry/policy"
)

// TestCreationRules attacks the server's creation rules as a runner
// with a spec of its own would: the agents and tools the rules give
// runners it creates; a connector, an MCP server (never started), a
// remote agent or a tool the rules do not name stays an admin's; a
// viewer creates nothing; a run of an inline spec is resumed only by
// who may create it now (an operator who tightens the rules and
// restarts takes the right back).
func TestCreationRules(t *testing.T) {
	keys := []Key{{Name: "val", SHA256: HashKey("view-key"), Role: RoleViewer}, {Name: "rui", SHA256: HashKey("run-key"), Role: RoleRunner},
		{Name: "ada", SHA256: HashKey("admin-key"), Role: RoleAdmin}}
	runners := policy.Creation{"agent:*": {"runner"}, "tool:kv_*": {"runner"}}
	f := newFixture(t, Config{Keys: keys, Create: runners})
	marker := filepath.Join(t.TempDir(), "started")
	const head = `"agent_name": "inline", "version": "v1", "system_text": "Greet."`
	for _, tc := range []struct {
		name, key, spec string
		status          int
		says            string
	}{
		{"a runner's agent", "run-key", `"tools": ["kv_set"]`, 200, ""},
		{"an admin's", "admin-key", `"tools": ["kv_set"]`, 200, ""},
		{"a viewer's", "view-key", `"tools": ["kv_set"]`, 403, "this needs the role runner"},
		{"a connector", "run-key", `"tools": ["run_command"], "connectors": {"shell": {"dir": "/", "allow": ["sh"]}}`, 403,
			`user rui (roles: viewer, runner) may not create connector:shell: "*" is for the roles admin`},
		{"an MCP server", "run-key", `"tools": ["mcp:box/*"], "mcp_servers": [{"name": "box", "command": "sh", "args": ["-c", "touch ` + marker + `"]}]`, 403,
			"may not create mcp:sh -c touch"},
		{"a remote agent", "run-key", `"tools": ["a2a:https://agents.example.com/crm"]`, 403, "may not create a2a:agents.example.com"},
		{"a tool no rule names", "run-key", `"tools": ["kv_set", "http_get"]`, 403, "may not create tool:http_get"},
		{"a memory of its own", "run-key", `"memory": {"backend": "` + marker + `", "stream": "s"}`, 403, "may not create memory:" + marker},
		{"a schema that reads a file", "run-key", `"output_schema": {"type": "object", "properties": {"a": {"$ref": "file:///etc/hostname"}}}`, 400,
			"a schema reads no file or URL"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, body := f.do(t, "POST", "/v1/runs?wait=true", tc.key, `{"spec": {`+head+`, `+tc.spec+`}}`)
			if code != tc.status {
				t.Fatalf("%d %v, want %d", code, body, tc.status)
			}
			if e, _ := body["error"].(map[string]any); tc.says != "" && (e == nil || !strings.Contains(e["message"].(string), tc.says)) {
				t.Errorf("%v\nwant it to say %s", body, tc.says)
			}
		})
	}
	if _, err := os.Stat(marker); err == nil {
		t.Error("a runner's spec started its MCP server")
	}

	// A runner's inline run pauses (its spec takes a served agent's name
	// and version: it is still the runner's spec); after a restart with
	// the default rules (only an admin creates), the runner may no longer
	// resume it, nor send a spec the server would read.
	f = newFixture(t, Config{Keys: keys, Create: runners}) // its script not yet played
	_, paused := f.do(t, "POST", "/v1/runs?wait=true", "run-key", `{"spec": {"agent_name": "greeter", "version": "v1", "system_text": "Greet.",
		"tools": ["kv_set"], "policy": {"approval": {"tools": ["kv_set"]}}}}`)
	if paused["terminate_reason"] != "awaiting_approval" {
		t.Fatalf("the inline run: %v", paused)
	}
	id := paused["id"].(string)
	strict, err := New(Config{Store: f.st, Agents: agent.NewRegistry(), Keys: keys, AgentOptions: f.srv.cfg.AgentOptions})
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(strict)
	defer func() {
		hs.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		strict.Close(ctx)
	}()
	g := &fixture{srv: strict, http: hs, st: f.st}
	code, body := g.do(t, "POST", "/v1/runs/"+id+"/resume", "run-key", `{"deny": ["call_1_1"]}`)
	if e, _ := body["error"].(map[string]any); code != 403 || !strings.Contains(e["message"].(string), "may not create agent:greeter") {
		t.Errorf("a runner resumes under rules that no longer let it create the agent: %d %v", code, body)
	}
	code, body = g.do(t, "POST", "/v1/runs", "run-key", `{"spec": {"agent_name": "x", "output_schema": {"$ref": "file:///etc/hostname"}}}`)
	if e, _ := body["error"].(map[string]any); code != 403 || !strings.Contains(e["message"].(string), "may not create agent:x") {
		t.Errorf("a runner's spec is read before it is refused: %d %v", code, body)
	}
	if code, body := f.do(t, "POST", "/v1/runs/"+id+"/resume?wait=true", "run-key", `{"deny": ["call_1_1"]}`); code != 200 {
		t.Errorf("the runner resumes where the rules let it: %d %v", code, body)
	}
}

// TestCreationRulesChecked: rules that name no role, or a role the
// server does not give, are refused at New, naming the glob.
func TestCreationRulesChecked(t *testing.T) {
	f := newFixture(t, Config{})
	for _, tc := range []struct {
		rules policy.Creation
		says  string
	}{
		{policy.Creation{"mcp:*": {"owner"}}, `creation "mcp:*": role "owner" is not viewer, runner, admin or *`},
		{policy.Creation{"agent:*": nil}, `creation "agent:*": name at least one role`},
	} {
		t.Run(tc.says, func(t *testing.T) {
			_, err := New(Config{Store: f.st, Create: tc.rules})
			if err == nil || !strings.Contains(err.Error(), tc.says) {
				t.Errorf("New: %v", err)
			}
		})
	}
}
