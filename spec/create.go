package spec

import (
	"maps"
	"net/url"
	"slices"
	"strings"

	"github.com/agentry/agentry/tool"
)

// Creates is what building s brings into being, as a host's creation
// rules (policy.Creation) name it, known before anything is opened:
// "agent:NAME" for the agent and each sub-agent and handoff target it
// names, "connector:KIND" for each connector it configures, "mcp:COMMAND
// ARGS" or "mcp:HOST" for each MCP server (what it runs or reaches, not
// its name), "a2a:HOST" for each remote agent (another source's entries
// as "SCHEME:NAME", NAME up to the first "/"), "memory:BACKEND" for a
// memory backend of its own (a URL's scheme and host, or the file), and
// "tool:NAME" for each plain tools entry. Hosts are in lower case. The
// tools a source lists are known only once it is open.
func (s *Spec) Creates() []string {
	out := []string{"agent:" + s.AgentName}
	add := func(w string) {
		if !slices.Contains(out, w) {
			out = append(out, w)
		}
	}
	for _, h := range s.Handoffs {
		name, _ := ParseRef(h)
		add("agent:" + name)
	}
	for _, kind := range slices.Sorted(maps.Keys(s.Connectors)) {
		add("connector:" + kind)
	}
	for _, m := range s.MCPServers {
		add(mcpItem(&m))
	}
	if s.Memory != nil && s.Memory.Backend != "" {
		add("memory:" + redactDSN(s.Memory.Backend))
	}
	for _, entry := range s.Tools {
		scheme := tool.SchemeOf(entry)
		rest := strings.TrimPrefix(entry, scheme+":")
		switch scheme {
		case "":
			add("tool:" + entry)
		case "agent":
			name, _ := ParseRef(rest)
			add("agent:" + name)
		case "a2a":
			add("a2a:" + hostOf(rest))
		case "mcp":
			// The server's own item is its command or host (above): its
			// name is the spec's label for it.
		default:
			name, _, _ := strings.Cut(rest, "/")
			add(scheme + ":" + name)
		}
	}
	return out
}

// mcpItem is what an MCP server is as a creation: what the spec makes
// the host run (its command line, "mcp:npx -y @scope/server-x") or
// reach (its host, "mcp:mcp.example.com"), never the label the spec
// gives it.
func mcpItem(m *MCPServer) string {
	if m.Command != "" {
		return "mcp:" + strings.Join(append([]string{m.Command}, m.Args...), " ")
	}
	return "mcp:" + hostOf(m.URL)
}

// hostOf is the host of a URL, in lower case and without a trailing dot
// (so that "EVIL.com." is "evil.com"), or the URL itself when it has
// none.
func hostOf(raw string) string {
	if u, err := url.Parse(raw); err == nil && u.Host != "" {
		return strings.TrimSuffix(strings.ToLower(u.Hostname()), ".")
	}
	return raw
}

// redactDSN is a data source name as a creation names it: a URL's
// scheme and host (no credentials, no path), or the name as written.
func redactDSN(dsn string) string {
	if u, err := url.Parse(dsn); err == nil && u.Host != "" {
		return u.Scheme + "://" + hostOf(dsn)
	}
	return dsn
}
