package mcp

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/agentry/agentry/tool"
)

// Tool is one tool of an MCP server, as agents call it.
type Tool struct {
	c      *Client
	info   tool.Info
	remote string // the server's name for it
}

// Remote is the server's name of the tool, which Info().Name may differ
// from (tool.NameFor of the spec's prefix and this name).
func (t *Tool) Remote() string { return t.remote }

// Info says what the tool is: its model name, description, input schema,
// and the idempotency class and risk its annotations imply.
func (t *Tool) Info() tool.Info { return t.info }

// Call sends one tools/call. The server's progress reaches the agentry
// call (tool.Call.Report); its result becomes the tool's output (see
// Output); a result flagged isError is a "tool_error", a server that
// cannot be reached an "mcp_unavailable", naming the server.
func (t *Tool) Call(ctx context.Context, args json.RawMessage) (json.RawMessage, error) {
	if len(args) == 0 {
		args = json.RawMessage("{}")
	}
	res, err := t.c.call(ctx, &sdk.CallToolParams{Name: t.remote, Arguments: args})
	if err != nil {
		return nil, t.failure(ctx, err)
	}
	out, refs, err := output(res, t.c.media())
	if call := tool.CallFrom(ctx); call != nil {
		for _, ref := range refs {
			call.Attach(path.Base(ref), ref)
		}
	}
	if err != nil {
		return nil, &tool.ErrorDetails{Type: "mcp_error", Recoverable: false,
			Message: fmt.Sprintf("mcp server %s: tool %s: %v", t.c.cfg.Name, t.remote, err)}
	}
	if res.IsError {
		d := &tool.ErrorDetails{Type: "tool_error", Recoverable: true, Message: errorText(res), Details: map[string]any{"server": t.c.cfg.Name}}
		if len(out) > 0 && out[0] != '"' { // more than its text
			d.Details["result"] = out
		}
		return nil, d
	}
	return out, nil
}

// failure names what went wrong with a call: the run's context, the
// server's refusal (a JSON-RPC error: bad arguments, an unknown tool),
// or the server itself.
func (t *Tool) failure(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		return ctx.Err()
	}
	var rpc *jsonrpc.Error
	var me *Error
	switch {
	case errors.As(err, &me):
		return &tool.ErrorDetails{Type: "mcp_unavailable", Recoverable: false, Message: me.Error()}
	case gone(err):
		return &tool.ErrorDetails{Type: "mcp_unavailable", Recoverable: false,
			Message: fmt.Sprintf("mcp server %s went away during the call of %s: %v", t.c.cfg.Name, t.remote, err)}
	case errors.As(err, &rpc):
		return &tool.ErrorDetails{Type: "mcp_error", Recoverable: true,
			Message: fmt.Sprintf("mcp server %s refused the call of %s: %v", t.c.cfg.Name, t.remote, err)}
	}
	return err
}

func newTool(c *Client, t *sdk.Tool, taken map[string]bool) (*Tool, error) {
	params, err := json.Marshal(t.InputSchema)
	if err != nil || string(params) == "null" {
		params = json.RawMessage(`{"type":"object"}`)
	}
	name := tool.NameFor(c.cfg.Prefix + t.Name)
	for taken[name] { // two server names that map to one model name
		name = tool.NameFor(c.cfg.Prefix + t.Name + "#" + name)
	}
	taken[name] = true
	desc := t.Description
	if desc == "" && t.Annotations != nil {
		desc = t.Annotations.Title
	}
	if desc == "" {
		desc = t.Title
	}
	info := tool.Info{Name: name, Description: desc, Parameters: params}
	if trust := c.cfg.TrustAnnotations; trust == nil || *trust {
		info.Idempotency, info.Risk = classOf(t.Annotations)
	} else {
		info.Idempotency, info.Risk = classOf(nil)
	}
	return &Tool{c: c, info: info, remote: t.Name}, nil
}

// classOf is the idempotency class and risk a tool's annotations imply:
// readOnlyHint safe (low risk); idempotentHint idempotent; anything else
// non-idempotent, as when there are none. destructiveHint false is a
// medium risk, true (or absent, the protocol's default) high; a tool
// without annotations has no risk level.
func classOf(a *sdk.ToolAnnotations) (tool.Idempotency, tool.Risk) {
	switch {
	case a == nil:
		return tool.NonIdempotent, ""
	case a.ReadOnlyHint:
		return tool.Safe, tool.RiskLow
	}
	risk := tool.RiskHigh
	if a.DestructiveHint != nil && !*a.DestructiveHint {
		risk = tool.RiskMedium
	}
	if a.IdempotentHint {
		return tool.Idempotent, risk
	}
	return tool.NonIdempotent, risk
}

// errorText is what a failed result says, for the model.
func errorText(res *sdk.CallToolResult) string {
	var parts []string
	for _, c := range res.Content {
		if t, ok := c.(*sdk.TextContent); ok && t.Text != "" {
			parts = append(parts, t.Text)
		}
	}
	if len(parts) == 0 {
		return "the tool reported an error without a message"
	}
	return strings.Join(parts, "\n")
}
