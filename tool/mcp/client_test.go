package mcp_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/url"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/agentry/agentry/event"
	"github.com/agentry/agentry/spec"
	"github.com/agentry/agentry/tool"
	"github.com/agentry/agentry/tool/mcp"
)

// reporter keeps what a call reports.
type reporter struct {
	mu  sync.Mutex
	got []event.Progress
}

func (r *reporter) ReportProgress(_ *tool.Call, p event.Progress) {
	r.mu.Lock()
	r.got = append(r.got, p)
	r.mu.Unlock()
}

func open(t *testing.T, cfg spec.MCPServer) *mcp.Client {
	t.Helper()
	cfg.MediaDir = t.TempDir()
	c, err := mcp.Open(context.Background(), cfg, mcp.Options{LookupEnv: testEnv})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func testEnv(name string) (string, bool) {
	switch name {
	case "AGENTRY_TEST_GIVEN":
		return "handed-over", true
	case "AGENTRY_TEST_TOKEN":
		return "tok-123", true
	}
	return os.LookupEnv(name)
}

// call runs one call the way an agent does: through tool.Handle, with a
// reporter for its progress.
func call(t *testing.T, c *mcp.Client, name, args string) (json.RawMessage, error, []event.Progress) {
	t.Helper()
	tools, err := c.Tools(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range tools {
		if tt.Info().Name == name {
			rep := &reporter{}
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			out, err := tool.Handle(ctx, &tool.Call{Name: name, Tool: tt, Info: tt.Info(), Arguments: json.RawMessage(args), Reporter: rep})
			rep.mu.Lock()
			defer rep.mu.Unlock()
			return out.JSON, err, rep.got
		}
	}
	t.Fatalf("no tool %q", name)
	return nil, nil, nil
}

// Over each transport, against a server built from the official SDK: the
// tools with their model names, classes and schemas; text, structured
// content, images as references, resource links, embedded resources, an
// error result, and progress and log messages as the call's progress.
func TestTransports(t *testing.T) {
	for _, tc := range []struct {
		name string
		cfg  func(t *testing.T) spec.MCPServer
	}{
		{"stdio", func(*testing.T) spec.MCPServer { return stdioServer("serve") }},
		{"streamable_http", func(t *testing.T) spec.MCPServer { return httpServer(t, false) }},
		{"sse", func(t *testing.T) spec.MCPServer { return httpServer(t, true) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := open(t, tc.cfg(t))
			tools, err := c.Tools(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			class := map[string]string{}
			for _, tt := range tools {
				class[tt.Info().Name] = string(tt.Info().Idempotency) + "/" + string(tt.Info().Risk)
			}
			for name, want := range map[string]string{"get-sum": "safe/low", "weather_now": "idempotent/medium",
				"pay": "non_idempotent/", "delete": "non_idempotent/high", "image": "safe/low"} {
				if class[name] != want {
					t.Errorf("%s: class %q, want %q (all: %v)", name, class[name], want, class)
				}
			}

			out, err, _ := call(t, c, "get-sum", `{"a": 2, "b": 3}`)
			if err != nil || string(out) != `"The sum of 2 and 3 is 5."` {
				t.Errorf("get-sum: %s, %v", out, err)
			}
			out, err, _ = call(t, c, "weather_now", `{"city": "Lisbon"}`)
			if err != nil || string(out) != `{"city":"Lisbon","temperature":21.5}` {
				t.Errorf("weather_now: %s, %v", out, err)
			}
			checkImage(t, c)

			_, err, _ = call(t, c, "fail", `{}`)
			var d *tool.ErrorDetails
			if !errors.As(err, &d) || d.Type != "tool_error" || d.Message != "the ledger is locked" || !d.Recoverable {
				t.Errorf("fail: %#v", err)
			}
			_, err, _ = call(t, c, "get-sum", `{"a": "two"}`)
			if !errors.As(err, &d) || d.Type != "tool_error" && d.Type != "mcp_error" || !strings.Contains(d.Message, "a") {
				t.Errorf("bad arguments: %#v", err)
			}

			out, err, got := call(t, c, "slow", `{}`)
			if err != nil || string(out) != `"done"` {
				t.Fatalf("slow: %s, %v", out, err)
			}
			want := []event.Progress{{Message: "worker: starting", Level: "info"},
				{Progress: 1, Total: 3, Message: "step 1"}, {Progress: 2, Total: 3, Message: "step 2"}, {Progress: 3, Total: 3, Message: "step 3"}}
			if !slices.Equal(got, want) {
				t.Errorf("slow reported %+v, want %+v", got, want)
			}
		})
	}
}

func checkImage(t *testing.T, c *mcp.Client) {
	t.Helper()
	out, err, _ := call(t, c, "image", `{}`)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(out), "iVBOR") {
		t.Errorf("the image's base64 is in the output: %s", out)
	}
	var got struct {
		Content []map[string]any `json:"content"`
	}
	if err := json.Unmarshal(out, &got); err != nil || len(got.Content) != 4 {
		t.Fatalf("image: %s, %v", out, err)
	}
	img := got.Content[1]
	if img["type"] != "image" || img["mime_type"] != "image/png" || img["size"] != float64(len(pngBytes)) {
		t.Errorf("image item: %v", img)
	}
	u, err := url.Parse(img["ref"].(string))
	if err != nil || u.Scheme != "file" {
		t.Fatalf("ref %v", img["ref"])
	}
	if data, err := os.ReadFile(u.Path); err != nil || string(data) != string(pngBytes) {
		t.Errorf("the kept file: %v", err)
	}
	if l := got.Content[2]; l["type"] != "resource_link" || l["uri"] != "file:///docs/readme.md" || l["mime_type"] != "text/markdown" {
		t.Errorf("resource link: %v", l)
	}
	if r := got.Content[3]; r["type"] != "resource" || r["text"] != "a note" || r["uri"] != "mem://note" {
		t.Errorf("embedded resource: %v", r)
	}
}

// With two calls in flight on one server (the calls of two runs, maybe
// of two users), a log message belongs to neither: it reaches no run's
// events, only the logger.
func TestLogMessagesStayWithTheirCall(t *testing.T) {
	cfg, started, release := httpServerStarted(t, false)
	defer release() // the server may not have heard of the cancel
	c := open(t, cfg)
	tools, _ := c.Tools(context.Background())
	var wait *mcp.Tool
	for _, tt := range tools {
		if tt.Remote() == "wait" {
			wait = tt
		}
	}
	other := &reporter{}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan struct{})
	go func() {
		defer close(done)
		tool.Handle(ctx, &tool.Call{Name: "wait", Tool: wait, Info: wait.Info(), Arguments: json.RawMessage("{}"), Reporter: other})
	}()
	select {
	case <-started:
	case <-time.After(20 * time.Second):
		t.Fatal("the wait call did not reach the server")
	}
	_, err, got := call(t, c, "slow", `{}`)
	cancel()
	<-done
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range append(got, other.got...) {
		if p.Level != "" {
			t.Errorf("a log message reached a call: %+v", p)
		}
	}
	if len(got) != 3 {
		t.Errorf("slow's progress: %+v", got)
	}
}

// A spec that does not trust a server's annotations has each of its tools
// non-idempotent, whatever the server says.
func TestUntrustedAnnotations(t *testing.T) {
	cfg := httpServer(t, false)
	no := false
	cfg.TrustAnnotations = &no
	c := open(t, cfg)
	tools, err := c.Tools(context.Background())
	if err != nil || len(tools) == 0 {
		t.Fatal(err)
	}
	for _, tt := range tools {
		if info := tt.Info(); info.Idempotency != tool.NonIdempotent || info.Risk != "" {
			t.Errorf("%s: %s/%s", info.Name, info.Idempotency, info.Risk)
		}
	}
}

// A server that adds a tool says so (tools/list_changed); the client
// lists its tools again.
func TestListChanged(t *testing.T) {
	for _, tc := range []struct {
		name string
		cfg  func(t *testing.T) spec.MCPServer
	}{
		{"stdio", func(*testing.T) spec.MCPServer { return stdioServer("serve") }},
		{"streamable_http", func(t *testing.T) spec.MCPServer { return httpServer(t, false) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := open(t, tc.cfg(t))
			before := c.Changes()
			if _, err, _ := call(t, c, "grow", `{}`); err != nil {
				t.Fatal(err)
			}
			waitUntil(t, func() bool { return c.Changes() != before })
			out, err, _ := call(t, c, "late", `{}`)
			if err != nil || string(out) != `"late but here"` {
				t.Errorf("late: %s, %v", out, err)
			}
		})
	}
}

// waitUntil polls ok until it holds, failing the test after 10 seconds.
func waitUntil(t *testing.T, ok func() bool) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); !ok(); time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("it did not happen within 10 s")
		}
	}
}

// A stdio server sees the spec's env, with ${env:NAME} filled in, and
// none of agentry's own variables beside a few (PATH, HOME, ...): an API
// key in agentry's environment does not reach it.
func TestStdioEnvironment(t *testing.T) {
	t.Setenv("AGENTRY_TEST_SECRET", "sk-live-canary")
	c := open(t, stdioServer("serve"))
	out, err, _ := call(t, c, "env", `{}`)
	if err != nil || string(out) != `"given=handed-over leaked=false"` {
		t.Errorf("env: %s, %v", out, err)
	}
	cfg := stdioServer("serve")
	cfg.Env["X"] = "${env:AGENTRY_TEST_UNSET}"
	_, err = mcp.Open(context.Background(), cfg, mcp.Options{LookupEnv: testEnv})
	if err == nil || !strings.Contains(err.Error(), "mcp server local") || !strings.Contains(err.Error(), "AGENTRY_TEST_UNSET is not set") {
		t.Errorf("an unset variable: %v", err)
	}
}

// A server that does not start, answer or stay up is an error naming it,
// and leaves no process behind.
func TestServerFailures(t *testing.T) {
	t.Run("exits at start", func(t *testing.T) {
		_, err := mcp.Open(context.Background(), stdioServer("exit"), mcp.Options{LookupEnv: testEnv})
		var me *mcp.Error
		if !errors.As(err, &me) || me.Server != "local" || me.Op != "start" || !strings.Contains(err.Error(), "the database is gone") {
			t.Errorf("%v", err)
		}
	})
	t.Run("no such command", func(t *testing.T) {
		_, err := mcp.Open(context.Background(), spec.MCPServer{Name: "ghost", Command: "agentry-no-such-server"}, mcp.Options{})
		if err == nil || !strings.HasPrefix(err.Error(), "mcp server ghost: start: ") || !strings.Contains(err.Error(), "agentry-no-such-server") {
			t.Errorf("%v", err)
		}
	})
	t.Run("does not answer", func(t *testing.T) {
		cfg := stdioServer("hang")
		cfg.ConnectTimeoutMS = 300
		_, err := mcp.Open(context.Background(), cfg, mcp.Options{LookupEnv: testEnv})
		if err == nil || !strings.Contains(err.Error(), "mcp server local: start: no answer within 300ms") {
			t.Errorf("%v", err)
		}
	})
	t.Run("does not list its tools", func(t *testing.T) {
		cfg := stdioServer("mute")
		cfg.ConnectTimeoutMS = 300
		_, err := mcp.Open(context.Background(), cfg, mcp.Options{LookupEnv: testEnv})
		if err == nil || !strings.Contains(err.Error(), "mcp server local: list tools: no answer within 300ms") {
			t.Errorf("%v", err)
		}
	})
	t.Run("dies during a call", func(t *testing.T) {
		c := open(t, stdioServer("serve"))
		_, err, _ := call(t, c, "crash", `{}`)
		var d *tool.ErrorDetails
		if !errors.As(err, &d) || d.Type != "mcp_unavailable" || !strings.Contains(d.Message, "mcp server local") {
			t.Fatalf("%#v", err)
		}
		// The next call starts the server again.
		out, err, _ := call(t, c, "get-sum", `{"a": 1, "b": 1}`)
		if err != nil || string(out) != `"The sum of 1 and 1 is 2."` {
			t.Errorf("after the crash: %s, %v", out, err)
		}
	})
	t.Run("leaves no process", func(t *testing.T) {
		cfg := stdioServer("serve")
		cfg.MediaDir = t.TempDir()
		c, err := mcp.Open(context.Background(), cfg, mcp.Options{LookupEnv: testEnv})
		if err != nil {
			t.Fatal(err)
		}
		out, err, _ := call(t, c, "spawn", `{}`)
		var pid int
		var s string
		if err == nil {
			err = json.Unmarshal(out, &s)
		}
		if err == nil {
			pid, err = strconv.Atoi(s)
		}
		if err != nil {
			c.Close()
			t.Fatal(err)
		}
		if !alive(pid) {
			t.Fatalf("the server's child %d is not running", pid)
		}
		c.Close()
		waitUntil(t, func() bool { return !alive(pid) })
	})
	t.Run("closed", func(t *testing.T) {
		c := open(t, httpServer(t, false))
		c.Close()
		if _, err := c.Tools(context.Background()); err == nil || !strings.Contains(err.Error(), "mcp server remote") {
			t.Errorf("%v", err)
		}
	})
}

// alive reports whether pid runs (a zombie does not).
func alive(pid int) bool {
	if syscall.Kill(pid, 0) != nil {
		return false
	}
	stat, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	return err != nil || !regexp.MustCompile(`\) Z `).Match(stat)
}
