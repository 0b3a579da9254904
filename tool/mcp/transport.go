package mcp

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/agentry/agentry/internal/httphdr"
	"github.com/agentry/agentry/spec"
)

// connector makes a transport for each session: a command to start, or
// a URL to reach.
type connector interface {
	transport() (sdk.Transport, *process, error)
}

func newConnector(cfg *spec.MCPServer, o *Options, notify func(*jsonrpc.Request)) (connector, error) {
	lookup := o.LookupEnv
	if lookup == nil {
		lookup = os.LookupEnv
	}
	switch t := cfg.TransportName(); t {
	case spec.MCPStdio:
		env, err := childEnv(cfg.Env, lookup)
		if err != nil {
			return nil, err
		}
		return &command{cfg: cfg, env: env, o: o}, nil
	case spec.MCPStreamableHTTP, spec.MCPSSE:
		hdr := http.Header{}
		for k, v := range cfg.Headers {
			val, err := spec.ExpandEnv(v, lookup)
			if err != nil {
				return nil, fmt.Errorf("headers.%s: %w", k, err)
			}
			hdr.Set(k, val)
		}
		base := http.DefaultTransport
		if o.HTTPClient != nil && o.HTTPClient.Transport != nil {
			base = o.HTTPClient.Transport
		}
		h := &headers{base: &httphdr.Transport{Base: base, Header: hdr}}
		if t == spec.MCPStreamableHTTP {
			h.notify = notify // SSE's connection is ordered instead
		}
		hc := &http.Client{Transport: h}
		if o.HTTPClient != nil {
			hc.Timeout, hc.Jar, hc.CheckRedirect = o.HTTPClient.Timeout, o.HTTPClient.Jar, o.HTTPClient.CheckRedirect
		}
		if o.OAuth != nil && t == spec.MCPSSE {
			return nil, fmt.Errorf("OAuth is for the streamable_http transport, not sse")
		}
		return &remote{url: cfg.URL, sse: t == spec.MCPSSE, client: hc, oauth: o.OAuth}, nil
	default:
		return nil, fmt.Errorf("transport %q: want stdio, streamable_http or sse", t)
	}
}

// inherited are the variables a stdio server sees of agentry's own
// environment: enough to find programs and a home, none of agentry's
// secrets (API keys stay with agentry unless the spec's env passes them).
var inherited = []string{"PATH", "HOME", "USER", "LOGNAME", "SHELL", "TERM", "TMPDIR", "LANG", "LC_ALL", "TZ",
	"XDG_CACHE_HOME", "XDG_CONFIG_HOME", "SYSTEMROOT", "APPDATA", "LOCALAPPDATA", "PROGRAMFILES", "USERPROFILE",
	// where npx and go run find what they run
	"NODE_PATH", "GOPATH", "GOCACHE", "GOMODCACHE", "GOFLAGS", "GOPROXY", "GOTOOLCHAIN"}

func childEnv(extra map[string]string, lookup func(string) (string, bool)) ([]string, error) {
	env := map[string]string{}
	for _, k := range inherited {
		if v, ok := lookup(k); ok {
			env[k] = v
		}
	}
	for k, v := range extra {
		val, err := spec.ExpandEnv(v, lookup)
		if err != nil {
			return nil, fmt.Errorf("env.%s: %w", k, err)
		}
		env[k] = val
	}
	out := make([]string, 0, len(env))
	for k, v := range env {
		out = append(out, k+"="+v)
	}
	sort.Strings(out)
	return out, nil
}

// command starts a stdio server.
type command struct {
	cfg *spec.MCPServer
	env []string
	o   *Options
}

func (c *command) transport() (sdk.Transport, *process, error) {
	cmd := exec.Command(c.cfg.Command, c.cfg.Args...)
	cmd.Env = c.env
	cmd.Dir = c.o.BaseDir
	p := &process{cmd: cmd}
	cmd.Stderr = &p.stderr
	// A child the server started may hold its stderr open: waiting for
	// the server stops waiting for that after a second.
	cmd.WaitDelay = time.Second
	ownGroup(cmd)
	// The SDK closes stdin and waits before it signals; a server that
	// ignores both is killed with its group by process.stop.
	return &sdk.CommandTransport{Command: cmd, TerminateDuration: 2 * time.Second}, p, nil
}

// process is a started stdio server.
type process struct {
	cmd    *exec.Cmd
	stderr tail
}

// stop kills what is left of the server's process group: a server that
// started children of its own (npx starts node) leaves none behind.
func (p *process) stop() {
	if p == nil || p.cmd.Process == nil {
		return
	}
	killGroup(p.cmd)
}

// stderrTail is the end of the server's stderr, on one line.
func (p *process) stderrTail() string {
	if p == nil {
		return ""
	}
	return p.stderr.String()
}

// tail keeps the last 2 KiB written to it.
type tail struct {
	mu  sync.Mutex
	buf []byte
}

const tailSize = 2048

func (t *tail) Write(b []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.buf = append(t.buf, b...)
	if len(t.buf) > tailSize {
		t.buf = append(t.buf[:0], t.buf[len(t.buf)-tailSize:]...)
	}
	return len(b), nil
}

func (t *tail) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return strings.Join(strings.Fields(strings.ToValidUTF8(string(t.buf), "?")), " ")
}

// remote reaches a server over HTTP.
type remote struct {
	url    string
	sse    bool
	client *http.Client
	oauth  auth.OAuthHandler
}

func (r *remote) transport() (sdk.Transport, *process, error) {
	if r.sse {
		return &sdk.SSEClientTransport{Endpoint: r.url, HTTPClient: r.client}, nil, nil
	}
	return &sdk.StreamableClientTransport{Endpoint: r.url, HTTPClient: r.client, MaxRetries: 2, OAuthHandler: r.oauth}, nil, nil
}

// headers sends requests through base (which adds the spec's headers),
// and taps the event streams a streamable HTTP server answers with.
type headers struct {
	base   http.RoundTripper
	notify func(*jsonrpc.Request)
}

func (h *headers) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := h.base.RoundTrip(req)
	if err == nil && h.notify != nil && strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		resp.Body = &tap{ReadCloser: resp.Body, notify: h.notify}
	}
	return resp, err
}

// tap reads the server-sent events of a response as the SDK reads them,
// and passes on the notifications among them before the SDK sees what
// follows (see ordered).
type tap struct {
	io.ReadCloser
	notify func(*jsonrpc.Request)
	line   []byte
	data   []byte
}

func (t *tap) Read(p []byte) (int, error) {
	n, err := t.ReadCloser.Read(p)
	for _, b := range p[:n] {
		if b != '\n' {
			if len(t.line) < maxTapLine {
				t.line = append(t.line, b)
			}
			continue
		}
		line := bytes.TrimSuffix(t.line, []byte("\r"))
		switch {
		case len(line) == 0:
			t.event()
		case bytes.HasPrefix(line, []byte("data:")):
			t.data = append(t.data, bytes.TrimPrefix(bytes.TrimPrefix(line, []byte("data:")), []byte(" "))...)
		}
		t.line = t.line[:0]
	}
	return n, err
}

// maxTapLine bounds what a tap keeps of one line: notifications are
// small, results may not be (and are the SDK's to read).
const maxTapLine = 64 << 10

func (t *tap) event() {
	data := t.data
	t.data = t.data[:0]
	if !bytes.Contains(data, []byte(`"notifications/`)) {
		return
	}
	if msg, err := jsonrpc.DecodeMessage(data); err == nil {
		if req, ok := msg.(*jsonrpc.Request); ok && !req.IsCall() {
			t.notify(req)
		}
	}
}

// ordered passes a server's progress and log notifications to their
// calls as the connection reads them, before the result that follows
// them: the SDK would hand them over after it returned the result, and
// a call's last progress would be lost. (The streamable HTTP connection
// cannot be wrapped: the SDK tells it of the session through a method
// of its own.)
type ordered struct {
	sdk.Transport
	c *Client
}

func (o ordered) Connect(ctx context.Context) (sdk.Connection, error) {
	conn, err := o.Transport.Connect(ctx)
	if err != nil {
		return nil, err
	}
	return &orderedConn{conn, o.c}, nil
}

type orderedConn struct {
	sdk.Connection
	c *Client
}

func (o *orderedConn) Read(ctx context.Context) (jsonrpc.Message, error) {
	msg, err := o.Connection.Read(ctx)
	if req, ok := msg.(*jsonrpc.Request); ok && !req.IsCall() {
		o.c.notified(req)
	}
	return msg, err
}
