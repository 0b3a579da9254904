package mcp_test

import (
	"context"
	"encoding/base64"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"strconv"
	"sync"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
	"go.uber.org/goleak"

	"github.com/agentry/agentry/spec"
)

// The test binary is also the stdio MCP server the tests start: with
// AGENTRY_MCP_TEST_SERVER set it serves the testServer's tools on stdin
// and stdout, built from the official SDK, and exits.
func TestMain(m *testing.M) {
	if mode := os.Getenv("AGENTRY_MCP_TEST_SERVER"); mode != "" {
		serveStdio(mode)
		return
	}
	goleak.VerifyTestMain(m)
}

func serveStdio(mode string) {
	switch mode {
	case "exit":
		fmt.Fprintln(os.Stderr, "fatal: the database is gone")
		os.Exit(3)
	case "hang":
		time.Sleep(time.Hour)
	}
	srv := testServer()
	if mode == "mute" { // answers the handshake, never a list of its tools
		srv.AddReceivingMiddleware(func(next sdk.MethodHandler) sdk.MethodHandler {
			return func(ctx context.Context, method string, req sdk.Request) (sdk.Result, error) {
				if method == "tools/list" {
					<-ctx.Done()
					return nil, ctx.Err()
				}
				return next(ctx, method, req)
			}
		})
	}
	if err := srv.Run(context.Background(), &sdk.StdioTransport{}); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}

// pngBytes is a 1x1 PNG.
var pngBytes, _ = base64.StdEncoding.DecodeString("iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg==")

type sumIn struct {
	A int `json:"a" jsonschema:"the first number"`
	B int `json:"b" jsonschema:"the second number"`
}

type weather struct {
	City        string  `json:"city"`
	Temperature float64 `json:"temperature"`
}

func yes() *bool { b := true; return &b }
func no() *bool  { b := false; return &b }

func text(s string) *sdk.CallToolResult {
	return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: s}}}
}

// testServer is an MCP server with a tool for each thing the client must
// handle.
func testServer() *sdk.Server { return newTestServer(nil, nil) }

// newTestServer is testServer whose wait tool sends on started (when not
// nil) once it runs, and returns when released closes.
func newTestServer(started chan<- struct{}, released <-chan struct{}) *sdk.Server {
	s := sdk.NewServer(&sdk.Implementation{Name: "test-server", Version: "1"}, nil)
	// grow answers once the server sent its list_changed (which the SDK
	// sends a moment after the change), so that the client reads it first.
	announced := make(chan struct{}, 16)
	s.AddSendingMiddleware(func(next sdk.MethodHandler) sdk.MethodHandler {
		return func(ctx context.Context, method string, req sdk.Request) (sdk.Result, error) {
			res, err := next(ctx, method, req)
			if method == "notifications/tools/list_changed" {
				announced <- struct{}{}
			}
			return res, err
		}
	})
	sdk.AddTool(s, &sdk.Tool{Name: "get-sum", Description: "Adds two numbers",
		Annotations: &sdk.ToolAnnotations{ReadOnlyHint: true}},
		func(_ context.Context, _ *sdk.CallToolRequest, in sumIn) (*sdk.CallToolResult, any, error) {
			return text(fmt.Sprintf("The sum of %d and %d is %d.", in.A, in.B, in.A+in.B)), nil, nil
		})
	sdk.AddTool(s, &sdk.Tool{Name: "weather.now", Description: "The weather",
		Annotations: &sdk.ToolAnnotations{IdempotentHint: true, DestructiveHint: no()}},
		func(_ context.Context, _ *sdk.CallToolRequest, in struct {
			City string `json:"city"`
		}) (*sdk.CallToolResult, weather, error) {
			return nil, weather{City: in.City, Temperature: 21.5}, nil
		})
	s.AddTool(&sdk.Tool{Name: "image", Description: "A picture and a caption", InputSchema: map[string]any{"type": "object"},
		Annotations: &sdk.ToolAnnotations{ReadOnlyHint: true}},
		func(context.Context, *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
			return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: "a dot"},
				&sdk.ImageContent{Data: pngBytes, MIMEType: "image/png"},
				&sdk.ResourceLink{URI: "file:///docs/readme.md", Name: "readme", MIMEType: "text/markdown"},
				&sdk.EmbeddedResource{Resource: &sdk.ResourceContents{URI: "mem://note", MIMEType: "text/plain", Text: "a note"}}}}, nil
		})
	s.AddTool(&sdk.Tool{Name: "fail", InputSchema: map[string]any{"type": "object"}},
		func(context.Context, *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
			r := text("the ledger is locked")
			r.IsError = true
			return r, nil
		})
	s.AddTool(&sdk.Tool{Name: "pay", Description: "Pays", InputSchema: map[string]any{"type": "object"}},
		func(context.Context, *sdk.CallToolRequest) (*sdk.CallToolResult, error) { return text("paid"), nil })
	s.AddTool(&sdk.Tool{Name: "delete", InputSchema: map[string]any{"type": "object"},
		Annotations: &sdk.ToolAnnotations{DestructiveHint: yes()}},
		func(context.Context, *sdk.CallToolRequest) (*sdk.CallToolResult, error) { return text("deleted"), nil })
	s.AddTool(&sdk.Tool{Name: "slow", Description: "Works in three steps", InputSchema: map[string]any{"type": "object"}},
		func(ctx context.Context, req *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
			_ = req.Session.Log(ctx, &sdk.LoggingMessageParams{Level: "info", Logger: "worker", Data: "starting"})
			for i := 1; i <= 3; i++ {
				if tok := req.Params.GetProgressToken(); tok != nil {
					_ = req.Session.NotifyProgress(ctx, &sdk.ProgressNotificationParams{ProgressToken: tok,
						Progress: float64(i), Total: 3, Message: "step " + strconv.Itoa(i)})
				}
			}
			return text("done"), nil
		})
	s.AddTool(&sdk.Tool{Name: "wait", Description: "Waits until cancelled", InputSchema: map[string]any{"type": "object"}},
		func(ctx context.Context, _ *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
			if started != nil { // an in-process test waits for it
				select {
				case started <- struct{}{}:
				case <-ctx.Done():
				case <-released:
				}
			}
			select {
			case <-ctx.Done():
				return nil, ctx.Err()
			case <-released: // the test ended, whether or not the cancel arrived
				return text("released"), nil
			}
		})
	s.AddTool(&sdk.Tool{Name: "env", Description: "Reads variables", InputSchema: map[string]any{"type": "object"}},
		func(context.Context, *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
			_, leaked := os.LookupEnv("AGENTRY_TEST_SECRET")
			return text(fmt.Sprintf("given=%s leaked=%v", os.Getenv("GIVEN"), leaked)), nil
		})
	s.AddTool(&sdk.Tool{Name: "leak", Description: "Says what it was given, everywhere it can", InputSchema: map[string]any{"type": "object"}},
		func(ctx context.Context, req *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
			given := os.Getenv("GIVEN")
			_ = req.Session.Log(ctx, &sdk.LoggingMessageParams{Level: "warning", Data: "the token is " + given})
			if tok := req.Params.GetProgressToken(); tok != nil {
				_ = req.Session.NotifyProgress(ctx, &sdk.ProgressNotificationParams{ProgressToken: tok, Progress: 1, Message: "using " + given})
			}
			return text("your token: " + given), nil
		})
	s.AddTool(&sdk.Tool{Name: "crash", InputSchema: map[string]any{"type": "object"}},
		func(context.Context, *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
			fmt.Fprintln(os.Stderr, "panic: out of memory")
			os.Exit(2)
			return nil, nil
		})
	s.AddTool(&sdk.Tool{Name: "spawn", Description: "Starts a child process and says its pid", InputSchema: map[string]any{"type": "object"}},
		func(context.Context, *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
			cmd := exec.Command("sleep", "300")
			if err := cmd.Start(); err != nil {
				return nil, err
			}
			return text(strconv.Itoa(cmd.Process.Pid)), nil
		})
	s.AddTool(&sdk.Tool{Name: "grow", Description: "Adds the tool late", InputSchema: map[string]any{"type": "object"}},
		func(context.Context, *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
			s.AddTool(&sdk.Tool{Name: "late", Description: "Came later", InputSchema: map[string]any{"type": "object"},
				Annotations: &sdk.ToolAnnotations{ReadOnlyHint: true}},
				func(context.Context, *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
					return text("late but here"), nil
				})
			select {
			case <-announced:
			case <-time.After(10 * time.Second):
				return nil, fmt.Errorf("the list_changed was not sent")
			}
			return text("grown"), nil
		})
	return s
}

// stdioServer is the spec entry that starts the test binary as a server.
func stdioServer(mode string) spec.MCPServer {
	return spec.MCPServer{Name: "local", Command: os.Args[0], Env: map[string]string{"AGENTRY_MCP_TEST_SERVER": mode, "GIVEN": "${env:AGENTRY_TEST_GIVEN}"},
		ConnectTimeoutMS: 20000}
}

// httpServer serves testServer over streamable HTTP (sse false) or the
// legacy SSE transport, until the test ends.
func httpServer(t *testing.T, sse bool) spec.MCPServer {
	t.Helper()
	cfg, _, _ := httpServerStarted(t, sse)
	return cfg
}

// httpServerStarted is httpServer, with the channel its wait tool sends
// on when it runs, and what ends the wait calls still going.
func httpServerStarted(t *testing.T, sse bool) (spec.MCPServer, <-chan struct{}, func()) {
	t.Helper()
	started, released := make(chan struct{}), make(chan struct{})
	srv := newTestServer(started, released)
	var h http.Handler
	if sse {
		h = sdk.NewSSEHandler(func(*http.Request) *sdk.Server { return srv }, nil)
	} else {
		h = sdk.NewStreamableHTTPHandler(func(*http.Request) *sdk.Server { return srv }, nil)
	}
	// The spec's header, its token from the environment, reaches the server.
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer tok-123" {
			http.Error(w, "who are you?", http.StatusUnauthorized)
			return
		}
		h.ServeHTTP(w, r)
	}))
	t.Cleanup(ts.Close)
	var once sync.Once
	release := func() { once.Do(func() { close(released) }) }
	t.Cleanup(release) // first: a wait call still going ends
	cfg := spec.MCPServer{Name: "remote", URL: ts.URL, Headers: map[string]string{"Authorization": "Bearer ${env:AGENTRY_TEST_TOKEN}"}}
	if sse {
		cfg.Transport = spec.MCPSSE
	}
	return cfg, started, release
}
