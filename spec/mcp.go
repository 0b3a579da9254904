package spec

import (
	"fmt"
	"net/url"
	"strings"

	"github.com/agentry/agentry/tool"
)

// The transports of an MCP server.
const (
	MCPStdio          = "stdio"
	MCPStreamableHTTP = "streamable_http"
	MCPSSE            = "sse" // the legacy HTTP+SSE transport of protocol 2024-11-05
)

// MCPServer is how an agent reaches one MCP server: a
// command it starts and speaks to over stdio, or a URL. Its tools are
// named in the spec's tools as "mcp:NAME/TOOL" or "mcp:NAME/*".
type MCPServer struct {
	// Name is how tools entries refer to the server.
	Name string `json:"name"`
	// Command, Args and Env start a stdio server. The child sees only a
	// few variables of agentry's environment (PATH, HOME, ...) and Env,
	// whose values take ${env:NAME} from agentry's.
	Command string            `json:"command,omitempty"`
	Args    []string          `json:"args,omitempty"`
	Env     map[string]string `json:"env,omitempty"`
	// URL reaches a remote server over Transport: streamable_http (the
	// default for a URL) or sse. Headers go with every request; their
	// values take ${env:NAME} from the environment, so that a token need
	// not be written in the spec.
	URL       string            `json:"url,omitempty"`
	Transport string            `json:"transport,omitempty"`
	Headers   map[string]string `json:"headers,omitempty"`
	// ConnectTimeoutMS bounds starting the server and its handshake
	// (default 30 s). Calls are bounded by the agent's tool timeouts.
	ConnectTimeoutMS int64 `json:"connect_timeout_ms,omitempty"`
	// TrustAnnotations, when false, ignores what the server says of its
	// tools (readOnlyHint, idempotentHint, destructiveHint): each is then
	// non-idempotent, never repeated blindly. Nil trusts them: the spec
	// chose the server.
	TrustAnnotations *bool `json:"trust_annotations,omitempty"`
	// Prefix is put before the names of the server's tools as the model
	// sees them, to keep two servers' tools apart ("fs_" makes
	// read_text_file fs_read_text_file).
	Prefix string `json:"prefix,omitempty"`
	// MediaDir is where images, audio and binary resources the server
	// returns are kept, named by their SHA-256, so that the transcript
	// holds a reference instead of their bytes; relative to the spec's
	// directory. Default: agentry-media in the system's temporary
	// directory.
	MediaDir string `json:"media_dir,omitempty"`
}

// TransportName is the server's transport: Transport, else stdio for a
// command and streamable_http for a URL.
func (m *MCPServer) TransportName() string {
	switch {
	case m.Transport != "":
		return m.Transport
	case m.Command != "":
		return MCPStdio
	}
	return MCPStreamableHTTP
}

// MCPServer returns the spec's MCP server called name, or nil.
func (s *Spec) MCPServer(name string) *MCPServer {
	for i := range s.MCPServers {
		if s.MCPServers[i].Name == name {
			return &s.MCPServers[i]
		}
	}
	return nil
}

// ParseMCPTool splits a tools entry "mcp:SERVER/TOOL" (TOOL "*" for all
// of the server's tools); ok is false for an entry of another kind.
func ParseMCPTool(entry string) (server, name string, ok bool) {
	rest, ok := strings.CutPrefix(entry, "mcp:")
	if !ok {
		return "", "", false
	}
	server, name, _ = strings.Cut(rest, "/")
	return server, name, true
}

func (s *Spec) checkMCP(c *checker) {
	for i := range s.MCPServers {
		m := &s.MCPServers[i]
		at := fmt.Sprintf("mcp_servers[%d]", i)
		switch {
		case m.Name == "":
			c.bad("%s: name is required", at)
		case !tool.ValidName(m.Name):
			c.bad("%s: name %q: use 1 to 64 letters, digits, '_' or '-'", at, m.Name)
		case s.MCPServer(m.Name) != m:
			c.bad("%s: name %q is taken by an earlier server", at, m.Name)
		}
		if m.Name != "" {
			at = fmt.Sprintf("mcp_servers[%d] %q", i, m.Name)
		}
		m.check(c, at)
	}
}

func (m *MCPServer) check(c *checker, at string) {
	switch t := m.TransportName(); {
	case m.Command != "" && m.URL != "":
		c.bad("%s: give a command or a url, not both", at)
	case m.Command == "" && m.URL == "":
		c.bad("%s: a command (stdio) or a url is required", at)
	case t == MCPStdio && m.Command == "":
		c.bad("%s: transport stdio needs a command", at)
	case t != MCPStdio && m.URL == "":
		c.bad("%s: transport %s needs a url", at, t)
	case t != MCPStdio && t != MCPStreamableHTTP && t != MCPSSE:
		c.bad("%s: transport %q: want stdio, streamable_http or sse", at, t)
	}
	if m.URL != "" {
		if u, err := url.Parse(m.URL); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			c.bad("%s: url %q is not an http or https URL", at, m.URL)
		}
	}
	if m.Command == "" && (len(m.Args) > 0 || len(m.Env) > 0) {
		c.bad("%s: args and env are for a command", at)
	}
	if m.URL == "" && len(m.Headers) > 0 {
		c.bad("%s: headers are for a url", at)
	}
	for _, field := range []struct {
		name string
		vals map[string]string
	}{{"env", m.Env}, {"headers", m.Headers}} {
		for k, v := range field.vals {
			if _, err := ExpandEnv(v, func(string) (string, bool) { return "", true }); err != nil {
				c.bad("%s: %s.%s: %v", at, field.name, k, err)
			}
		}
	}
	if m.ConnectTimeoutMS < 0 {
		c.bad("%s: connect_timeout_ms %d is negative", at, m.ConnectTimeoutMS)
	}
	if m.Prefix != "" && !tool.ValidName(m.Prefix) {
		c.bad("%s: prefix %q: use letters, digits, '_' or '-'", at, m.Prefix)
	}
}

// checkMCPTool checks a tools entry "mcp:SERVER/TOOL".
func (s *Spec) checkMCPTool(c *checker, i int, entry, server, name string) {
	switch {
	case server == "" || name == "":
		c.bad("tools[%d] %q: want mcp:SERVER/TOOL or mcp:SERVER/*", i, entry)
	case s.MCPServer(server) == nil:
		known := make([]string, 0, len(s.MCPServers))
		for _, m := range s.MCPServers {
			known = append(known, m.Name)
		}
		if len(known) == 0 {
			c.bad("tools[%d] %q: the spec has no mcp_servers", i, entry)
		} else {
			c.bad("tools[%d] %q: no MCP server %q in mcp_servers (known: %s)", i, entry, server, strings.Join(known, ", "))
		}
	case strings.ContainsAny(name, "/*") && name != "*":
		c.bad("tools[%d] %q: a tool name or *, not a pattern", i, entry)
	}
}

// ExpandEnv replaces each ${env:NAME} in s with lookup(NAME). A variable
// lookup does not know, or a malformed reference, is an error naming it.
func ExpandEnv(s string, lookup func(name string) (string, bool)) (string, error) {
	if !strings.Contains(s, "${env:") {
		return s, nil
	}
	var b strings.Builder
	for {
		i := strings.Index(s, "${env:")
		if i < 0 {
			b.WriteString(s)
			return b.String(), nil
		}
		b.WriteString(s[:i])
		rest := s[i+len("${env:"):]
		j := strings.IndexByte(rest, '}')
		if j < 0 {
			return "", fmt.Errorf("${env: without its closing }")
		}
		name := rest[:j]
		if name == "" || strings.ContainsFunc(name, func(r rune) bool {
			return !(r == '_' || r >= 'A' && r <= 'Z' || r >= 'a' && r <= 'z' || r >= '0' && r <= '9')
		}) {
			return "", fmt.Errorf("${env:%s}: not a variable name", name)
		}
		v, ok := lookup(name)
		if !ok {
			return "", fmt.Errorf("${env:%s}: %s is not set", name, name)
		}
		b.WriteString(v)
		s = rest[j+1:]
	}
}
