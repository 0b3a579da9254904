package main

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/agentry/agentry/internal/syncbuf"
	"github.com/agentry/agentry/server"
)

// served is an agentry serve process on a port of its own choosing.
type served struct {
	cmd  *exec.Cmd
	base string
	out  *syncbuf.Buffer
}

// startServe starts agentry serve with args on a free loopback port (the
// process picks it: no other can take it in between) and waits until it
// answers.
func startServe(t *testing.T, args ...string) *served {
	t.Helper()
	return startServing(t, append([]string{"serve", "--addr", "127.0.0.1:0"}, args...)...)
}

// startServing starts the binary with args, a command that serves HTTP
// and says where ("listening on URL"), and waits until it answers.
func startServing(t *testing.T, args ...string) *served {
	t.Helper()
	s := &served{out: &syncbuf.Buffer{}}
	s.cmd = exec.Command(binary(t), args...)
	s.cmd.Stdout, s.cmd.Stderr = s.out, s.out
	if err := s.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if s.cmd.ProcessState == nil {
			s.cmd.Process.Kill()
			s.cmd.Wait()
		}
	})
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if _, rest, ok := strings.Cut(s.out.String(), "listening on "); ok && s.base == "" {
			s.base, _, _ = strings.Cut(rest, " ")
		}
		if s.base != "" {
			if resp, err := http.Get(s.base + "/healthz"); err == nil {
				resp.Body.Close()
				return s
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("the server did not start:\n%s", s.out)
		}
	}
}

// stop sends SIGTERM and waits for the process to exit.
func (s *served) stop(t *testing.T) {
	t.Helper()
	s.cmd.Process.Signal(syscall.SIGTERM)
	if err := s.cmd.Wait(); err != nil {
		t.Errorf("serve exited with %v:\n%s", err, s.out)
	}
}

// call sends a JSON request and decodes the JSON answer.
func (s *served) call(t *testing.T, method, path, key, body string) (int, map[string]any) {
	t.Helper()
	req, _ := http.NewRequest(method, s.base+path, strings.NewReader(body))
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var out map[string]any
	data, _ := io.ReadAll(resp.Body)
	json.Unmarshal(data, &out)
	return resp.StatusCode, out
}

// TestServe runs agentry serve as a process: a run created over HTTP,
// its events streamed and resumed by Last-Event-ID after the server was
// stopped with SIGTERM and started again, with none lost or repeated;
// bearer keys with roles; a non-loopback address refused without keys.
func TestServe(t *testing.T) {
	db := filepath.Join(t.TempDir(), "runs.db")
	agents := "../../examples/agents"
	s := startServe(t, "--agents", agents, "--db", db)
	code, res := s.call(t, "POST", "/v1/runs?wait=true", "", `{"agent": "A2", "input": {"text": "Please help, this is urgent"}}`)
	if code != 200 || res["success"] != true {
		t.Fatalf("%d %v\n%s", code, res, s.out)
	}
	id := res["id"].(string)
	ids, types := s.sse(t, id, 0, nil)
	if len(ids) < 2 || types[0] != "run_start" || types[len(types)-1] != "run_end" {
		t.Fatalf("events %v %v", ids, types)
	}
	s.stop(t)
	// Another process over the same store resumes the stream exactly.
	s = startServe(t, "--agents", agents, "--db", db)
	rest, _ := s.sse(t, id, ids[0], nil)
	if len(rest) != len(ids)-1 || rest[0] != ids[1] || rest[len(rest)-1] != ids[len(ids)-1] {
		t.Errorf("after a restart, resumed after %d: %v, want %v", ids[0], rest, ids[1:])
	}
	if code, list := s.call(t, "GET", "/v1/agents", "", ""); code != 200 || len(list["agents"].([]any)) < 5 {
		t.Errorf("agents: %d %v", code, list)
	}
	// Every other route over the wire, and the errors a client meets.
	for _, tc := range []struct {
		method, path, body string
		status             int
	}{
		{"GET", "/v1/runs?agent=A2", "", 200},
		{"GET", "/v1/runs/" + id, "", 200},
		{"GET", "/v1/runs/" + id + "/audit", "", 200},
		{"GET", "/v1/whoami", "", 200},
		{"GET", "/healthz", "", 200},
		{"GET", "/readyz", "", 200},
		{"GET", "/openapi.json", "", 200},
		{"GET", "/v1/runs?since=yesterday", "", 400},
		{"POST", "/v1/runs", `{"agent": "A2", "inputs": {}}`, 400},
		{"POST", "/v1/runs", `{"agent": "nobody"}`, 404},
		{"GET", "/v1/runs/run_0000000000000000", "", 404},
		{"POST", "/v1/runs/" + id + "/abort", "", 409},
		{"POST", "/v1/runs/" + id + "/resume", `{}`, 409},
		{"POST", "/v1/runs", `{"agent": "A2", "input": {"text": "` + strings.Repeat("x", 2<<20) + `"}}`, 413},
	} {
		if code, body := s.call(t, tc.method, tc.path, "", tc.body); code != tc.status {
			t.Errorf("%s %s: %d, want %d: %v", tc.method, tc.path, code, tc.status, body)
		}
	}
	if resp, err := http.Get(s.base + "/"); err != nil || resp.StatusCode != 200 || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/html") {
		t.Errorf("the viewer: %v %v", resp, err)
	} else {
		resp.Body.Close()
	}
	s.stop(t)

	// Pipelines are served by name too.
	s = startServe(t, "--agents", agents, "--pipelines", "../../examples/pipelines", "--db", db)
	code, res = s.call(t, "POST", "/v1/runs?wait=true", "", `{"pipeline": "review", "input": {"task": "store the release"}}`)
	if code != 200 || res["success"] != true || res["envelope"] == nil {
		t.Errorf("a pipeline run: %d %v\n%s", code, res, s.out)
	}
	s.stop(t)

	// With keys: roles and owners hold over the wire. The run above is
	// the local operator's (made without keys): a viewer that reaches
	// every user's reads it, another does not find it.
	keys := filepath.Join(t.TempDir(), "keys.json")
	os.WriteFile(keys, []byte(`[{"name": "viewer", "sha256": "`+hashOf("v-key")+`", "role": "viewer", "all_users": true},
		{"name": "ada", "sha256": "`+hashOf("a-key")+`", "role": "runner"}]`), 0o600)
	s = startServe(t, "--agents", agents, "--db", db, "--auth-keys", keys, "--models", "scripted:elsewhere.json")
	if code, _ := s.call(t, "GET", "/v1/runs", "", ""); code != 401 {
		t.Errorf("no key: %d", code)
	}
	if code, _ := s.call(t, "GET", "/v1/runs/"+id, "v-key", ""); code != 200 {
		t.Errorf("a viewer reads: %d", code)
	}
	if code, _ := s.call(t, "GET", "/v1/runs/"+id, "a-key", ""); code != 404 {
		t.Errorf("another user's runner reads the operator's run: %d", code)
	}
	if code, body := s.call(t, "POST", "/v1/runs", "a-key", `{"agent": "A2", "model": "scripted:/etc/passwd"}`); code != 400 {
		t.Errorf("a model the operator did not list: %d %v", code, body)
	}
	if code, _ := s.call(t, "POST", "/v1/runs", "v-key", `{"agent": "A2"}`); code != 403 {
		t.Errorf("a viewer creates: %d", code)
	}
	s.stop(t)

	// Without keys, only loopback.
	if code, _, errs := run(t, "serve", "--addr", "0.0.0.0:0", "--agents", agents, "--db", db); code != 2 || !strings.Contains(errs, "loopback") {
		t.Errorf("a public address without keys: exit %d\n%s", code, errs)
	}
	if code, out, _ := run(t, "hash-key", "v-key"); code != 0 || strings.TrimSpace(out) != hashOf("v-key") {
		t.Errorf("hash-key: %d %q", code, out)
	}
	cmd := exec.Command(binary(t), "hash-key")
	cmd.Stdin = strings.NewReader("v-key\n")
	if out, err := cmd.Output(); err != nil || strings.TrimSpace(string(out)) != hashOf("v-key") {
		t.Errorf("hash-key from stdin: %v %q", err, out)
	}
}

func hashOf(key string) string { return server.HashKey(key) }

// TestServeCreationRules: serve --create lets a runner key run inline
// specs with what the rules give runners, and nothing else: a shell
// connector, an MCP server (never started) or a remote agent in its spec
// is refused with 403, naming it; without --create only an admin runs one; a rule with a
// role the server does not give stops serve from starting.
func TestServeCreationRules(t *testing.T) {
	dir := t.TempDir()
	agents := filepath.Join(dir, "agents")
	os.MkdirAll(agents, 0o755)
	script := filepath.Join(dir, "hello.json")
	os.WriteFile(script, []byte(`{"turns": [{"content": "Hello."}, {"content": "Hello again."}]}`), 0o600)
	keys := filepath.Join(dir, "keys.json")
	os.WriteFile(keys, []byte(`[{"name": "rui", "sha256": "`+hashOf("r-key")+`", "role": "runner"},
		{"name": "ada", "sha256": "`+hashOf("a-key")+`", "role": "admin"}]`), 0o600)
	db := filepath.Join(dir, "runs.db")
	inline := func(extra string) string {
		return `{"spec": {"agent_name": "mine", "version": "v1", "model_name": "scripted:` + script + `", "system_text": "Greet."` + extra + `}}`
	}
	shell := inline(`, "tools": ["run_command"], "connectors": {"shell": {"dir": "` + dir + `", "allow": ["touch"]}}`)

	s := startServe(t, "--agents", agents, "--db", db, "--auth-keys", keys, "--models", "scripted:"+script,
		"--create", "agent:*=runner", "--create", "tool:kv_*=runner")
	if code, body := s.call(t, "POST", "/v1/runs?wait=true", "r-key", inline(`, "tools": ["kv_get"]`)); code != 200 || body["result"] != "Hello." {
		t.Errorf("a runner's inline spec: %d %v\n%s", code, body, s.out)
	}
	marker := filepath.Join(dir, "started")
	for _, tc := range []struct{ name, spec, says string }{
		{"a shell connector", shell, `may not create connector:shell: "*" is for the roles admin`},
		{"an MCP server", inline(`, "tools": ["mcp:box/*"], "mcp_servers": [{"name": "box", "command": "touch", "args": ["` + marker + `"]}]`),
			"may not create mcp:touch " + marker},
		{"a remote agent", inline(`, "tools": ["a2a:https://agents.example.com/crm"]`), "may not create a2a:agents.example.com"},
	} {
		code, body := s.call(t, "POST", "/v1/runs?wait=true", "r-key", tc.spec)
		if e, _ := body["error"].(map[string]any); code != 403 || !strings.Contains(fmt.Sprint(e["message"]), tc.says) {
			t.Errorf("a runner's %s: %d %v", tc.name, code, body)
		}
	}
	if _, err := os.Stat(marker); err == nil {
		t.Error("the refused MCP server was started")
	}
	s.stop(t)

	s = startServe(t, "--agents", agents, "--db", db, "--auth-keys", keys, "--models", "scripted:"+script)
	if code, body := s.call(t, "POST", "/v1/runs", "r-key", inline("")); code != 403 {
		t.Errorf("a runner's inline spec without --create: %d %v", code, body)
	}
	if code, body := s.call(t, "POST", "/v1/runs?wait=true", "a-key", inline("")); code != 200 {
		t.Errorf("an admin's: %d %v", code, body)
	}
	s.stop(t)

	for _, tc := range []struct{ flag, says string }{
		{"mcp:*=owner", `creation "mcp:*": role "owner" is not viewer, runner, admin or *`},
		{"agent:*", `--create "agent:*": want WHAT=ROLE[,ROLE]`},
	} {
		if code, _, errs := run(t, "serve", "--agents", agents, "--db", db, "--create", tc.flag); code == 0 || !strings.Contains(errs, tc.says) {
			t.Errorf("--create %s: exit %d\n%s", tc.flag, code, errs)
		}
	}
}
