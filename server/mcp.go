package server

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/agentry/agentry/agent"
	"github.com/agentry/agentry/event"
	"github.com/agentry/agentry/internal/ids"
	"github.com/agentry/agentry/spec"
	"github.com/agentry/agentry/tool"
)

// MCP is the served agents as an MCP server (docs/mcp.md): each agent a
// tool named by the agent (its latest version), and the prompt store's
// templates prompts. A tool call is a run like one the HTTP API starts:
// stored, counted against MaxRuns, interrupted at Close. Serve it over
// stdio with its Run, or over HTTP at POST /mcp.
func (s *Server) MCP() *sdk.Server {
	s.mcpOnce.Do(s.buildMCP)
	return s.mcp
}

func (s *Server) buildMCP() {
	opts := &sdk.ServerOptions{
		Instructions: "Each tool is an agentry agent: call it with its input and it runs to its answer.",
		HasTools:     true,
		HasPrompts:   s.cfg.Prompts != nil,
	}
	if s.cfg.Prompts != nil {
		opts.CompletionHandler = s.complete // its prompts' arguments
	}
	s.mcp = sdk.NewServer(&sdk.Implementation{Name: "agentry", Title: "agentry agents", Version: s.cfg.Version}, opts)
	s.mcpLists.tools, s.mcpLists.prompts = map[string]string{}, map[string]string{}
	s.syncTools()
	s.syncPrompts(s.base)
	// The lists follow the served agents and the prompt store: an agent
	// or a template added, a newer version, one removed.
	s.mcp.AddReceivingMiddleware(func(next sdk.MethodHandler) sdk.MethodHandler {
		return func(ctx context.Context, method string, req sdk.Request) (sdk.Result, error) {
			switch method {
			case "tools/list", "tools/call":
				s.syncTools()
			case "prompts/list", "prompts/get":
				s.syncPrompts(ctx)
			}
			return next(ctx, method, req)
		}
	})
}

// mcpTool describes an agent as an MCP tool: its input schema, its output
// schema when it has an object one, and annotations from its tools.
func mcpTool(a *agent.Agent) *sdk.Tool {
	sp := a.Spec()
	t := &sdk.Tool{Name: sp.AgentName, Title: sp.AgentName + " " + sp.Version, Description: describeAgent(&sp),
		InputSchema: json.RawMessage(sp.InputJSONSchema())}
	var out struct {
		Type string `json:"type"`
	}
	if len(sp.OutputSchema) > 0 && json.Unmarshal(sp.OutputSchema, &out) == nil && out.Type == "object" {
		t.OutputSchema = json.RawMessage(sp.OutputSchema)
	}
	t.Annotations = annotations(a.Tools())
	return t
}

func describeAgent(sp *spec.Spec) string {
	for _, d := range []string{sp.Description, sp.PurposeText, sp.SystemText} {
		if d != "" {
			return d
		}
	}
	return "The " + sp.AgentName + " agent."
}

// annotations are what an agent's tools say of calling it: read-only
// when all of them are safe, idempotent when none is non-idempotent,
// destructive when one is high or critical risk, open-world when it has
// any tool.
func annotations(tools []tool.Info) *sdk.ToolAnnotations {
	readOnly, idempotent, destructive := true, true, false
	for _, t := range tools {
		class := t.Idempotency
		if class == "" {
			class = tool.IdempotencyOf(t.Risk)
		}
		readOnly = readOnly && class == tool.Safe
		idempotent = idempotent && class != tool.NonIdempotent
		destructive = destructive || t.Risk == tool.RiskHigh || t.Risk == tool.RiskCritical
	}
	openWorld := len(tools) > 0
	return &sdk.ToolAnnotations{ReadOnlyHint: readOnly, IdempotentHint: idempotent, DestructiveHint: &destructive, OpenWorldHint: &openWorld}
}

// mcpCall runs the agent called name for a tools/call: as the caller (a
// key's user over HTTP), in the MCP session (its runs share a session
// id), with the run's turns and tool calls as progress when the client
// asked for it. A client that cancels the call aborts the run.
func (s *Server) mcpCall(name string) sdk.ToolHandler {
	return func(ctx context.Context, req *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
		a, err := s.cfg.Agents.Get(name)
		if err != nil {
			return nil, fmt.Errorf("agent %s is no longer served", name)
		}
		input := map[string]any{}
		if len(req.Params.Arguments) > 0 && string(req.Params.Arguments) != "null" {
			if err := json.Unmarshal(req.Params.Arguments, &input); err != nil {
				return errorResult("the arguments are not a JSON object: " + err.Error()), nil
			}
		}
		sess, done, rf := s.start(ctx, &launch{agent: a, input: input, session: req.Session.ID(), metadata: map[string]string{"mcp_tool": name},
			listen: agent.WithEvents(mcpNotifier(ctx, req.Session, req.Params.GetProgressToken()), event.Types(event.TurnStart, event.ToolCallStart))},
			s.admitted, nil)
		if rf != nil {
			return errorResult(rf.message), nil
		}
		select {
		case res := <-done:
			return mcpResult(res.(*agent.Result)), nil
		case <-ctx.Done():
			sess.Abort()
			<-done
			return nil, ctx.Err()
		}
	}
}

// mcpNotifier tells the client of each turn and tool call of the run: a
// progress notification when the call has a progress token (progress
// counts them: it must grow with each one; there is no total, as nobody
// knows how many turns a run will take), and a log message at level info
// when the client asked for log messages.
func mcpNotifier(ctx context.Context, ss *sdk.ServerSession, tok any) func(event.Event) {
	var mu sync.Mutex
	step := 0
	return func(e event.Event) {
		if e.ParentRunID != "" {
			return // a sub-agent's
		}
		msg := fmt.Sprintf("turn %d", e.Turn)
		if e.Type == event.ToolCallStart {
			msg += ": calling " + e.Tool.Name
		}
		mu.Lock()
		defer mu.Unlock()
		step++
		if tok != nil {
			_ = ss.NotifyProgress(ctx, &sdk.ProgressNotificationParams{ProgressToken: tok, Progress: float64(step), Message: msg})
		}
		_ = ss.Log(ctx, &sdk.LoggingMessageParams{Level: "info", Logger: "agentry", Data: msg})
	}
}

// mcpResult is a run's Result as a tool result: the answer as text (and
// as structured content when it is an object), or an error result saying
// why there is none: a run awaiting approval names what waits and how to
// decide it.
func mcpResult(res *agent.Result) *sdk.CallToolResult {
	switch {
	case res.TerminateReason == agent.ReasonAwaitingApproval:
		what := "a tool call"
		if res.Error != nil {
			what = res.Error.Message
		}
		return errorResult(fmt.Sprintf("run %s is paused: %s. Decide it with POST /v1/runs/%s/resume or agentry resume %s --approve KEY (or --deny KEY)",
			res.ID, strings.TrimSuffix(what, "."), res.ID, res.ID))
	case !res.Success:
		msg := "the run did not succeed (" + string(res.TerminateReason) + ")"
		if res.Error != nil {
			msg = res.Error.Code + ": " + res.Error.Message
		}
		return errorResult(fmt.Sprintf("run %s failed: %s", res.ID, msg))
	}
	out := &sdk.CallToolResult{Meta: sdk.Meta{"agentry/run_id": res.ID}}
	if obj, ok := res.Result.(map[string]any); ok {
		out.StructuredContent = obj
	}
	text, ok := res.Result.(string)
	if !ok {
		b, _ := json.Marshal(res.Result)
		text = string(b)
	}
	out.Content = []sdk.Content{&sdk.TextContent{Text: text}}
	return out
}

func errorResult(msg string) *sdk.CallToolResult {
	return &sdk.CallToolResult{IsError: true, Content: []sdk.Content{&sdk.TextContent{Text: msg}}}
}

func mcpNotAllowed(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Allow", http.MethodPost)
	writeError(w, http.StatusMethodNotAllowed, "method_not_allowed",
		fmt.Sprintf("%s /mcp: the MCP endpoint is stateless: it has no stream to GET and no session to DELETE; POST each request", r.Method))
}

// mcpHTTP serves the MCP server over streamable HTTP, stateless (each
// request stands alone, as protocol 2026-07-28 has it), behind the
// server's keys and cross-site guard, and the SDK's own protection
// against DNS rebinding and cross-origin requests.
func (s *Server) mcpHTTP() http.Handler {
	return mcpSessions(sdk.NewStreamableHTTPHandler(func(*http.Request) *sdk.Server { return s.MCP() },
		&sdk.StreamableHTTPOptions{Stateless: true, PropagateRequestCancellation: true, CrossOriginProtection: http.NewCrossOriginProtection(), Logger: s.cfg.Logger}))
}

// mcpSessions gives a client that initializes a session (protocol
// 2025-11-25 and before) a session id, as that revision lets a server
// do: one that names no state, so that every server of a deployment
// accepts it, and a client is pinned to none of them. The requests that
// carry it stand alone, as every request does here.
func mcpSessions(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Mcp-Session-Id") == "" && r.Body != nil {
			data, err := io.ReadAll(r.Body) // bounded by the server's MaxBody
			// The handler reads it again, and meets the same error (a body
			// over the bound is refused as such).
			r.Body = io.NopCloser(io.MultiReader(bytes.NewReader(data), erring{err}))
			var msg struct {
				Method string `json:"method"`
			}
			if err == nil && json.Unmarshal(data, &msg) == nil && msg.Method == "initialize" {
				w.Header().Set("Mcp-Session-Id", ids.New("mcp"))
			}
		}
		next.ServeHTTP(w, r)
	})
}

// erring is a reader that fails with err (io.EOF when nil).
type erring struct{ err error }

func (f erring) Read([]byte) (int, error) {
	if f.err == nil {
		return 0, io.EOF
	}
	return 0, f.err
}
