package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	sdkmcp "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/agentry/agentry/internal/syncbuf"
	"github.com/agentry/agentry/internal/testdb"
)

// mcpRun runs the agent of specJSON with the scripted turns through the
// binary, and returns each step's observation by tool and the events.
func mcpRun(t *testing.T, dir, specJSON, turns string) (map[string]string, []map[string]any) {
	t.Helper()
	os.WriteFile(filepath.Join(dir, "agent.json"), []byte(specJSON), 0o600)
	os.WriteFile(filepath.Join(dir, "turns.json"), []byte(turns), 0o600)
	events := filepath.Join(dir, "events.jsonl")
	code, out, errs := runCLI(t, "run", filepath.Join(dir, "agent.json"), "--no-store", "--json", "-q", "--events", events)
	if code != 0 {
		t.Fatalf("exit %d\n%s", code, errs)
	}
	var res struct {
		Result any `json:"result"`
		Steps  []struct {
			Action *struct {
				Tool string `json:"tool"`
			} `json:"action"`
			Observation string `json:"observation"`
		} `json:"steps"`
	}
	if err := json.Unmarshal([]byte(out), &res); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	obs := map[string]string{}
	for _, s := range res.Steps {
		if s.Action != nil {
			obs[s.Action.Tool] += s.Observation
		}
	}
	f, err := os.Open(events)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var evs []map[string]any
	for sc := bufio.NewScanner(f); sc.Scan(); {
		var e map[string]any
		json.Unmarshal(sc.Bytes(), &e)
		evs = append(evs, e)
	}
	return obs, evs
}

// startNodeServer starts an npm MCP server that listens on PORT, on a free
// port (another one if it finds the port taken), until the test ends.
func startNodeServer(t *testing.T, bin string, args ...string) string {
	t.Helper()
	for attempt := 0; ; attempt++ {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		port := l.Addr().(*net.TCPAddr).Port
		l.Close()
		out := &syncbuf.Buffer{}
		cmd := exec.Command(bin, args...)
		cmd.Env = append(os.Environ(), "PORT="+strconv.Itoa(port))
		cmd.Stdout, cmd.Stderr = out, out
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		exited := make(chan error, 1)
		go func() { exited <- cmd.Wait() }()
		t.Cleanup(func() {
			cmd.Process.Kill()
			<-exited
		})
		for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(20 * time.Millisecond) {
			if c, err := net.Dial("tcp", "127.0.0.1:"+strconv.Itoa(port)); err == nil {
				c.Close()
				return "http://127.0.0.1:" + strconv.Itoa(port)
			}
			select {
			case <-exited:
				if attempt < 3 && strings.Contains(out.String(), "in use") {
					break
				}
				t.Fatalf("%s exited:\n%s", bin, out)
			default:
				if time.Now().After(deadline) {
					t.Fatalf("%s did not listen:\n%s", bin, out)
				}
				continue
			}
			break
		}
	}
}

// Through the binary, the MCP reference server "everything" from npm,
// over stdio, streamable HTTP and SSE: an agent calls its tools and gets
// the right results; the image is a reference to a kept file, not its
// base64; the long operation's progress arrives as events.
func TestMCPEverythingServer(t *testing.T) {
	modules := testdb.NPM(t, "@modelcontextprotocol/server-everything")
	bin := filepath.Join(modules, ".bin", "mcp-server-everything")
	turns := `{"turns": [{"tool_calls": [{"name": "echo", "arguments": {"message": "hello"}}, {"name": "get-sum", "arguments": {"a": 2, "b": 3}},
		{"name": "get-structured-content", "arguments": {"location": "Chicago"}}, {"name": "get-tiny-image", "arguments": {}},
		{"name": "trigger-long-running-operation", "arguments": {"duration": 1, "steps": 2}}]},
		{"content": "Done."}]}`
	for _, tc := range []struct {
		name   string
		server func(t *testing.T) string
	}{
		{"stdio", func(*testing.T) string {
			return fmt.Sprintf(`{"name": "every", "command": %q, "args": ["stdio"], "media_dir": "media"}`, bin)
		}},
		{"streamable_http", func(t *testing.T) string {
			return fmt.Sprintf(`{"name": "every", "url": %q, "media_dir": "media"}`, startNodeServer(t, bin, "streamableHttp")+"/mcp")
		}},
		{"sse", func(t *testing.T) string {
			return fmt.Sprintf(`{"name": "every", "url": %q, "transport": "sse", "media_dir": "media"}`, startNodeServer(t, bin, "sse")+"/sse")
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			obs, events := mcpRun(t, dir, `{"agent_name": "every", "version": "v1", "model_name": "scripted:turns.json", "system_text": "Use the tools.",
				"mcp_servers": [`+tc.server(t)+`],
				"tools": ["mcp:every/echo", "mcp:every/get-sum", "mcp:every/get-structured-content", "mcp:every/get-tiny-image", "mcp:every/trigger-long-running-operation"]}`, turns)
			for tool, want := range map[string]string{"echo": `"Echo: hello"`, "get-sum": `"The sum of 2 and 3 is 5."`,
				"trigger-long-running-operation": `"Long running operation completed. Duration: 1 seconds, Steps: 2."`} {
				if obs[tool] != want {
					t.Errorf("%s: %s, want %s", tool, obs[tool], want)
				}
			}
			var weather map[string]any
			if err := json.Unmarshal([]byte(obs["get-structured-content"]), &weather); err != nil || weather["temperature"] == nil || weather["conditions"] == nil {
				t.Errorf("get-structured-content: %s", obs["get-structured-content"])
			}
			checkKeptImage(t, obs["get-tiny-image"], filepath.Join(dir, "media"))
			var steps []float64
			for _, e := range events {
				if e["type"] == "tool_progress" {
					steps = append(steps, e["progress"].(map[string]any)["progress"].(float64))
				}
			}
			if len(steps) != 2 || steps[0] != 1 || steps[1] != 2 {
				t.Errorf("progress events: %v", steps)
			}
		})
	}
}

// checkKeptImage: the observation refers to a PNG kept in dir, by its
// mime type and size, and holds none of its base64.
func checkKeptImage(t *testing.T, obs, dir string) {
	t.Helper()
	var img struct {
		Content []map[string]any `json:"content"`
	}
	if err := json.Unmarshal([]byte(obs), &img); err != nil {
		t.Fatalf("get-tiny-image: %s", obs)
	}
	for _, item := range img.Content {
		if item["type"] != "image" {
			continue
		}
		u, err := url.Parse(item["ref"].(string))
		if err != nil || item["mime_type"] != "image/png" || filepath.Dir(u.Path) != dir {
			t.Fatalf("image item %v (want a file in %s)", item, dir)
		}
		data, err := os.ReadFile(u.Path)
		if err != nil || !strings.HasPrefix(string(data), "\x89PNG") || float64(len(data)) != item["size"] {
			t.Errorf("the kept image: %v, %d bytes", err, len(data))
		}
		if len(obs) > 1000 {
			t.Errorf("the observation is %d bytes: %s", len(obs), obs)
		}
		return
	}
	t.Errorf("no image in %s", obs)
}

// Through the binary, the filesystem and memory reference servers over
// stdio: a file written and read back in a temporary root (and one
// outside it refused), and a knowledge graph built and searched.
func TestMCPFilesystemAndMemoryServers(t *testing.T) {
	modules := testdb.NPM(t, "@modelcontextprotocol/server-filesystem")
	testdb.NPM(t, "@modelcontextprotocol/server-memory")
	dir := t.TempDir()
	root := filepath.Join(dir, "root")
	os.MkdirAll(root, 0o700)
	root, _ = filepath.EvalSymlinks(root)
	outside := filepath.Join(dir, "outside.txt")
	os.WriteFile(outside, []byte("not yours"), 0o600)
	graph := filepath.Join(dir, "graph.jsonl")
	obs, _ := mcpRun(t, dir, fmt.Sprintf(`{"agent_name": "keeper", "version": "v1", "model_name": "scripted:turns.json", "system_text": "Keep notes.",
		"mcp_servers": [{"name": "fs", "command": %q, "args": [%q]},
			{"name": "mem", "command": %q, "env": {"MEMORY_FILE_PATH": %q}}],
		"tools": ["mcp:fs/write_file", "mcp:fs/read_text_file", "mcp:mem/create_entities", "mcp:mem/search_nodes"]}`,
		filepath.Join(modules, ".bin", "mcp-server-filesystem"), root, filepath.Join(modules, ".bin", "mcp-server-memory"), graph),
		fmt.Sprintf(`{"turns": [
			{"tool_calls": [{"name": "write_file", "arguments": {"path": %q, "content": "day 1: Alfama"}},
				{"name": "create_entities", "arguments": {"entities": [{"name": "Lisbon", "entityType": "city", "observations": ["has trams"]}]}}]},
			{"tool_calls": [{"name": "read_text_file", "arguments": {"path": %q}}, {"name": "search_nodes", "arguments": {"query": "Lisbon"}}]},
			{"tool_calls": [{"name": "read_text_file", "arguments": {"path": %q}}]},
			{"content": "Done."}]}`, filepath.Join(root, "plan.txt"), filepath.Join(root, "plan.txt"), outside))
	if data, _ := os.ReadFile(filepath.Join(root, "plan.txt")); string(data) != "day 1: Alfama" {
		t.Errorf("the written file holds %q", data)
	}
	read := obs["read_text_file"]
	if !strings.HasPrefix(read, `{"content":"day 1: Alfama"}`) || !strings.Contains(read, "tool_error") || strings.Contains(read, "not yours") {
		t.Errorf("read_text_file: %s", read)
	}
	if s := obs["search_nodes"]; !strings.Contains(s, "has trams") || !strings.Contains(s, "city") {
		t.Errorf("search_nodes: %s", s)
	}
	if data, _ := os.ReadFile(graph); !strings.Contains(string(data), "Lisbon") {
		t.Errorf("the graph file holds %q", data)
	}
}

// agentry mcp tools lists a server's tools for a person, or as JSON; a
// server that does not start is exit 1 naming it, a bad SERVER-SPEC exit 2.
func TestMCPToolsCommand(t *testing.T) {
	modules := testdb.NPM(t, "@modelcontextprotocol/server-everything")
	bin := filepath.Join(modules, ".bin", "mcp-server-everything")
	code, out, errs := runCLI(t, "mcp", "tools", "--", bin, "stdio")
	if code != 0 || !regexpMatch(`(?m)^server\s+get-sum\s+safe\s+low\s+Returns the sum of two numbers$`, out) {
		t.Errorf("exit %d\n%s%s", code, out, errs)
	}
	code, out, _ = runCLI(t, "mcp", "tools", "--json", "--", bin, "stdio")
	var list []struct {
		Name, Idempotency string
		InputSchema       map[string]any `json:"input_schema"`
	}
	if err := json.Unmarshal([]byte(out), &list); code != 0 || err != nil || len(list) < 10 {
		t.Fatalf("exit %d, %v\n%s", code, err, out)
	}
	for _, tc := range []struct {
		name string
		args []string
		code int
		want string
	}{
		{"no such program", []string{"--", "agentry-no-such-server"}, 1, "mcp server server: start"},
		{"bad header", []string{"http://127.0.0.1:1/mcp", "--header", "nocolon"}, 2, `--header "nocolon": want NAME=VALUE`},
		{"bad transport", []string{"http://127.0.0.1:1/mcp", "--transport", "carrier-pigeon"}, 2, `transport "carrier-pigeon"`},
		{"unreachable", []string{"http://127.0.0.1:1/mcp"}, 1, "mcp server server: start"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, _, errs := runCLI(t, append([]string{"mcp", "tools"}, tc.args...)...)
			if code != tc.code || !strings.Contains(errs, tc.want) {
				t.Errorf("exit %d, %s; want %d naming %s", code, errs, tc.code, tc.want)
			}
		})
	}
}

func regexpMatch(pattern, s string) bool { return regexp.MustCompile(pattern).MatchString(s) }

// agentry mcp serve over stdio, driven by the official MCP Go SDK's
// client as an MCP host would: the agents are tools, a call runs one
// (progress on the way, the run stored), templates are prompts, and the
// server stops when the client closes its stdin.
func TestMCPServeStdio(t *testing.T) {
	dir := t.TempDir()
	os.MkdirAll(filepath.Join(dir, "agents", "greeter"), 0o700)
	os.MkdirAll(filepath.Join(dir, "prompts", "welcome"), 0o700)
	os.WriteFile(filepath.Join(dir, "agents", "greeter", "v1.json"), []byte(`{"agent_name": "greeter", "version": "v1",
		"description": "Greets a person.", "model_name": "scripted:../../turns.json", "system_text": "Greet.", "input_keys": ["name"],
		"tools": ["kv_set"]}`), 0o600)
	os.WriteFile(filepath.Join(dir, "turns.json"), []byte(`{"turns": [
		{"tool_calls": [{"name": "kv_set", "arguments": {"key": "greeted", "value": "Ada"}}]}, {"content": "Hello, Ada."}]}`), 0o600)
	os.WriteFile(filepath.Join(dir, "prompts", "welcome", "v1.json"), []byte(`{"id": "welcome", "version": "v1", "text": "Welcome ${name} to ${place}."}`), 0o600)
	db := filepath.Join(dir, "runs.db")
	cmd := exec.Command(binary(t), "mcp", "serve", "--agents", filepath.Join(dir, "agents"), "--prompts", filepath.Join(dir, "prompts"), "--db", db)
	stderr := &syncbuf.Buffer{}
	cmd.Stderr = stderr
	var mu sync.Mutex
	var progress []string
	client := sdkmcp.NewClient(&sdkmcp.Implementation{Name: "host", Version: "1"}, &sdkmcp.ClientOptions{
		ProgressNotificationHandler: func(_ context.Context, r *sdkmcp.ProgressNotificationClientRequest) {
			mu.Lock()
			progress = append(progress, r.Params.Message)
			mu.Unlock()
		}})
	ctx := context.Background()
	cs, err := client.Connect(ctx, &sdkmcp.CommandTransport{Command: cmd}, nil)
	if err != nil {
		t.Fatalf("%v\n%s", err, stderr)
	}
	tools, err := cs.ListTools(ctx, nil)
	if err != nil || len(tools.Tools) != 1 || tools.Tools[0].Name != "greeter" || tools.Tools[0].Description != "Greets a person." {
		t.Fatalf("tools: %+v, %v", tools, err)
	}
	params := &sdkmcp.CallToolParams{Name: "greeter", Arguments: map[string]any{"name": "Ada"}}
	params.SetProgressToken(1)
	res, err := cs.CallTool(ctx, params)
	if err != nil || res.IsError || res.Content[0].(*sdkmcp.TextContent).Text != "Hello, Ada." {
		t.Fatalf("call: %+v, %v\n%s", res, err, stderr)
	}
	id, _ := res.Meta["agentry/run_id"].(string)
	got, err := cs.GetPrompt(ctx, &sdkmcp.GetPromptParams{Name: "welcome", Arguments: map[string]string{"name": "Ada", "place": "Lisbon"}})
	if err != nil || got.Messages[0].Content.(*sdkmcp.TextContent).Text != "Welcome Ada to Lisbon." {
		t.Errorf("prompt: %+v, %v", got, err)
	}
	if err := cs.Close(); err != nil {
		t.Errorf("close: %v\n%s", err, stderr)
	}
	if cmd.ProcessState == nil || !cmd.ProcessState.Success() {
		t.Errorf("the server did not exit cleanly: %v\n%s", cmd.ProcessState, stderr)
	}
	mu.Lock()
	if strings.Join(progress, "|") != "turn 1|turn 1: calling kv_set|turn 2" {
		t.Errorf("progress %q", progress)
	}
	mu.Unlock()
	code, out, errs := runCLI(t, "trace", id, "--db", db)
	if code != 0 || !strings.Contains(out, "kv_set") {
		t.Errorf("the stored run %s: exit %d\n%s%s", id, code, out, errs)
	}
}

// examples/mcp runs as its README says: the agent starts the example's
// MCP server (go run) and keeps two notes in it.
func TestMCPExample(t *testing.T) {
	code, out, errs := runCLI(t, "run", "../../examples/mcp/agent.json", "--input", "task=Note the tram", "--no-store", "--json", "-q")
	if code != 0 {
		t.Fatalf("exit %d\n%s", code, errs)
	}
	var res struct {
		Steps []struct {
			Observation string `json:"observation"`
		} `json:"steps"`
	}
	if err := json.Unmarshal([]byte(out), &res); err != nil || len(res.Steps) != 3 {
		t.Fatalf("%v\n%s", err, out)
	}
	if got := res.Steps[2].Observation; got != `{"notes":["Tram 28 leaves from Martim Moniz","Pastéis de Belém close at 11 pm"]}` {
		t.Errorf("list_notes: %s", got)
	}
}
