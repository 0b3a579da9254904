// Package mcp makes the tools of MCP servers agentry tools, through the
// official MCP Go SDK: servers started as commands (stdio), and remote
// servers over streamable HTTP or the legacy SSE transport.
//
// A Client is one server as an agent uses it: one session, opened by
// Open and shared by every run of the agent, reopened by the next call
// after the server went away, closed by Close. Its tools are ordinary
// tools: the agent's policy, rate limits, approvals, timeouts and run log
// apply to them; their idempotency class comes from their annotations.
package mcp

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/agentry/agentry/event"
	"github.com/agentry/agentry/spec"
	"github.com/agentry/agentry/tool"
)

// DefaultConnectTimeout bounds starting a server and its handshake when
// the spec gives no connect_timeout_ms.
const DefaultConnectTimeout = 30 * time.Second

// Options are what a Client needs beyond the spec's entry.
type Options struct {
	// BaseDir resolves a relative media_dir (the spec's directory).
	BaseDir string
	// Logger receives what servers log while no call of theirs runs, and
	// a stdio server's stderr at debug level; nil discards them.
	Logger *slog.Logger
	// HTTPClient makes the requests to remote servers; nil is
	// http.DefaultClient's transport.
	HTTPClient *http.Client
	// LookupEnv reads the variables ${env:NAME} takes and those a stdio
	// server inherits; nil is os.LookupEnv.
	LookupEnv func(name string) (string, bool)
	// Version is the client version servers are told; "" is "dev".
	Version string
	// OAuth authorizes the requests to a remote server over streamable
	// HTTP, as the SDK's OAuth handlers do (auth.AuthorizationCodeHandler:
	// the authorization code flow with PKCE, client registration by
	// metadata document, dynamically or beforehand). Nil sends only the
	// spec's headers.
	OAuth auth.OAuthHandler
}

// Error is a server that could not be started, reached or kept: its
// message names the server.
type Error struct {
	Server string
	Op     string // "start", "list tools", "call TOOL"
	Err    error
	// Stderr is the end of what a stdio server wrote to its stderr, when
	// it wrote anything.
	Stderr string
}

func (e *Error) Error() string {
	msg := fmt.Sprintf("mcp server %s: %s: %v", e.Server, e.Op, e.Err)
	if e.Stderr != "" {
		msg += " (its stderr ends: " + e.Stderr + ")"
	}
	return msg
}

func (e *Error) Unwrap() error { return e.Err }

// Client is one MCP server as an agent uses it. It is safe for
// concurrent use.
type Client struct {
	cfg  spec.MCPServer
	o    Options
	conn connector
	sdk  *sdk.Client

	listMu  sync.Mutex // one listing of the tools at a time
	mu      sync.Mutex
	sess    *sdk.ClientSession
	proc    *process                // the stdio server's process, nil for a URL
	cancel  context.CancelCauseFunc // ends the context the session was opened with
	tools   []*Tool
	listed  uint64 // changes when tools was read
	closed  bool
	changes atomic.Uint64 // counts the server's list_changed notifications and reconnects

	calls  sync.Map // progress token → *tool.Call
	nextID atomic.Uint64
}

// Open starts or reaches the server cfg describes, completes the
// handshake and lists its tools, within cfg's connect timeout. A server
// that fails is an *Error naming it, and leaves no process behind.
func Open(ctx context.Context, cfg spec.MCPServer, o Options) (*Client, error) {
	c := &Client{cfg: cfg, o: o}
	if c.o.Logger == nil {
		c.o.Logger = slog.New(slog.DiscardHandler)
	}
	var err error
	if c.conn, err = newConnector(&c.cfg, &c.o, c.notified); err != nil {
		return nil, &Error{Server: cfg.Name, Op: "configure", Err: err}
	}
	version := o.Version
	if version == "" {
		version = "dev"
	}
	opts := &sdk.ClientOptions{
		// No roots, sampling or elicitation: a server that asks is refused
		// (docs/mcp.md).
		Capabilities:           &sdk.ClientCapabilities{},
		ToolListChangedHandler: func(context.Context, *sdk.ToolListChangedRequest) { c.changes.Add(1) },
	}
	c.sdk = sdk.NewClient(&sdk.Implementation{Name: "agentry", Version: version}, opts)
	if _, err := c.Tools(ctx); err != nil {
		c.Close()
		return nil, err
	}
	return c, nil
}

// timeout bounds starting the server and its handshake, and each listing
// of its tools.
func (c *Client) timeout() time.Duration {
	if c.cfg.ConnectTimeoutMS > 0 {
		return time.Duration(c.cfg.ConnectTimeoutMS) * time.Millisecond
	}
	return DefaultConnectTimeout
}

// Name is the server's name in the spec.
func (c *Client) Name() string { return c.cfg.Name }

// Changes counts the times the server's tools may have changed: its
// list_changed notifications and reconnections. Tools lists them again
// when it moved.
func (c *Client) Changes() uint64 { return c.changes.Load() }

// Tools returns the server's tools, listing them again first when the
// server said they changed (or came back) since they were last listed.
// Listing is bounded by the connect timeout, and calls go on meanwhile.
func (c *Client) Tools(ctx context.Context) ([]*Tool, error) {
	c.listMu.Lock() // one listing at a time
	defer c.listMu.Unlock()
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return nil, &Error{Server: c.cfg.Name, Op: "list tools", Err: sdk.ErrConnectionClosed}
	}
	if c.sess != nil && c.listed == c.changes.Load() {
		defer c.mu.Unlock()
		return slices.Clone(c.tools), nil
	}
	sess, err := c.session(ctx)
	seen := c.changes.Load()
	c.mu.Unlock()
	if err != nil {
		return nil, err
	}
	tools, err := c.list(ctx, sess)
	c.mu.Lock()
	defer c.mu.Unlock()
	if err != nil {
		return nil, err
	}
	c.tools, c.listed = tools, seen
	return slices.Clone(tools), nil
}

// Close ends the session and stops a stdio server (its whole process
// group, after it had a moment to exit on its own).
func (c *Client) Close() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.closed = true
	c.disconnect()
	return nil
}

// connect opens a session, within the connect timeout; c.mu is held.
func (c *Client) connect(ctx context.Context) error {
	d := c.timeout()
	// The SSE transport keeps the context it connects with for its event
	// stream: it must outlive the connect, so only the timeout or the
	// caller's giving up cancels it before the session is open.
	cctx, cancel := context.WithCancelCause(context.WithoutCancel(ctx))
	timer := time.AfterFunc(d, func() { cancel(fmt.Errorf("no answer within %s", d)) })
	stop := context.AfterFunc(ctx, func() { cancel(ctx.Err()) })
	defer func() { timer.Stop(); stop() }()
	t, proc, err := c.conn.transport()
	if err != nil {
		return &Error{Server: c.cfg.Name, Op: "start", Err: err}
	}
	if c.cfg.TransportName() != spec.MCPStreamableHTTP {
		t = ordered{t, c}
	} // streamable HTTP: the response bodies are tapped (tap)
	sess, err := c.sdk.Connect(cctx, t, nil)
	if err == nil && cctx.Err() != nil { // timed out just as it opened
		_ = sess.Close()
		err = cctx.Err()
	}
	if err != nil {
		cancel(err)
		proc.stop()
		if cause := context.Cause(cctx); cause != nil && !errors.Is(err, cause) {
			err = fmt.Errorf("%w: %w", cause, err)
		}
		return &Error{Server: c.cfg.Name, Op: "start", Err: err, Stderr: proc.stderrTail()}
	}
	c.sess, c.proc, c.cancel = sess, proc, cancel
	go c.watch(sess)
	if init := sess.InitializeResult(); init != nil && init.Capabilities != nil && init.Capabilities.Logging != nil {
		// Servers send no log messages until asked (for calls in flight
		// they become events); one that refuses is still usable.
		_ = sess.SetLoggingLevel(cctx, &sdk.SetLoggingLevelParams{Level: "info"})
	}
	return nil
}

// watch forgets a session once it ends (the server exited or hung up),
// so that the next call opens another.
func (c *Client) watch(sess *sdk.ClientSession) {
	err := sess.Wait()
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.sess != sess {
		return
	}
	c.o.Logger.Warn("mcp server went away", "server", c.cfg.Name, "error", err, "stderr", c.proc.stderrTail())
	c.disconnect()
}

// disconnect closes the session and stops its process; c.mu is held.
func (c *Client) disconnect() {
	if c.sess != nil {
		_ = c.sess.Close()
		c.sess = nil
		c.cancel(nil)
	}
	if c.proc != nil {
		c.proc.stop()
		c.proc = nil
	}
}

// session is the open session, opening one when the last went away;
// c.mu is held.
func (c *Client) session(ctx context.Context) (*sdk.ClientSession, error) {
	if c.closed {
		return nil, &Error{Server: c.cfg.Name, Op: "connect", Err: sdk.ErrConnectionClosed}
	}
	if c.sess == nil {
		if err := c.connect(ctx); err != nil {
			return nil, err
		}
		c.changes.Add(1) // a new session: its tools are listed again
	}
	return c.sess, nil
}

// list reads the server's tools, within the connect timeout.
func (c *Client) list(ctx context.Context, sess *sdk.ClientSession) ([]*Tool, error) {
	d := c.timeout()
	ctx, cancel := context.WithTimeoutCause(ctx, d, fmt.Errorf("no answer within %s", d))
	defer cancel()
	var tools []*Tool
	names := map[string]bool{}
	for t, err := range sess.Tools(ctx, nil) {
		if err != nil {
			if cause := context.Cause(ctx); cause != nil && !errors.Is(err, cause) {
				err = fmt.Errorf("%w: %w", cause, err)
			}
			return nil, &Error{Server: c.cfg.Name, Op: "list tools", Err: err}
		}
		tt, err := newTool(c, t, names)
		if err != nil {
			c.o.Logger.Warn("mcp tool left out", "server", c.cfg.Name, "tool", t.Name, "error", err)
			continue
		}
		tools = append(tools, tt)
	}
	return tools, nil
}

// call sends one tools/call on the open session (opening one if the last
// went away), with a progress token that routes the server's progress to
// the agentry call.
func (c *Client) call(ctx context.Context, params *sdk.CallToolParams) (*sdk.CallToolResult, error) {
	c.mu.Lock()
	sess, err := c.session(ctx)
	c.mu.Unlock()
	if err != nil {
		return nil, err
	}
	if call := tool.CallFrom(ctx); call != nil {
		token := "agentry-" + strconv.FormatUint(c.nextID.Add(1), 10)
		// Servers of protocol 2026-07-28 take the log level per request.
		params.Meta = sdk.Meta{sdk.MetaKeyLogLevel: "info"}
		params.SetProgressToken(token)
		c.calls.Store(token, call)
		defer c.calls.Delete(token)
	}
	res, err := sess.CallTool(ctx, params)
	if err != nil && ctx.Err() == nil && gone(err) {
		c.forget(sess) // the next call starts or reaches the server again
	}
	return res, err
}

// gone reports whether err says the session ended.
func gone(err error) bool {
	return errors.Is(err, sdk.ErrConnectionClosed) || errors.Is(err, sdk.ErrSessionMissing) ||
		errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF)
}

// forget drops sess if it is still the open session.
func (c *Client) forget(sess *sdk.ClientSession) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.sess == sess {
		c.disconnect()
	}
}

// notified passes on a progress or log notification, and marks the tools
// changed on a list_changed, in the order the connection read them: a
// server that changed its tools during a call has them listed again
// from the next turn on.
func (c *Client) notified(req *jsonrpc.Request) {
	switch req.Method {
	case "notifications/tools/list_changed":
		c.changes.Add(1)
	case "notifications/progress":
		var p sdk.ProgressNotificationParams
		if json.Unmarshal(req.Params, &p) == nil {
			c.progress(&p)
		}
	case "notifications/message":
		var p sdk.LoggingMessageParams
		if json.Unmarshal(req.Params, &p) == nil {
			c.logged(&p)
		}
	}
}

// progress passes a server's progress to the call it names.
func (c *Client) progress(p *sdk.ProgressNotificationParams) {
	if call, ok := c.calls.Load(fmt.Sprint(p.ProgressToken)); ok {
		call.(*tool.Call).Report(event.Progress{Progress: p.Progress, Total: p.Total, Message: p.Message})
	}
}

// logged passes what the server logs to the call in flight, when there
// is exactly one: nothing in the protocol ties a log message to a
// request, and the calls of several runs (of other users) share the
// session, so with several in flight, or none, it goes to the logger
// instead of into any run's events.
func (c *Client) logged(p *sdk.LoggingMessageParams) {
	msg, ok := p.Data.(string)
	if !ok {
		b, _ := json.Marshal(p.Data)
		msg = string(b)
	}
	if p.Logger != "" {
		msg = p.Logger + ": " + msg
	}
	var only *tool.Call
	n := 0
	c.calls.Range(func(_, v any) bool {
		only = v.(*tool.Call)
		n++
		return n < 2
	})
	if n == 1 {
		only.Report(event.Progress{Message: msg, Level: string(p.Level)})
		return
	}
	c.o.Logger.Info("mcp server log", "server", c.cfg.Name, "level", string(p.Level), "message", msg, "calls_in_flight", n)
}
