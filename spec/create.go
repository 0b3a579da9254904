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
// names, "connector:KIND" for each connector it configures, "mcp:SERVER"
// for each MCP server, "a2a:HOST" for each remote agent (another
// source's entries as "SCHEME:NAME", NAME up to the first "/"), and
// "tool:NAME" for each plain tools entry. The tools a source lists are
// known only once it is open.
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
		add("mcp:" + m.Name)
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
		default:
			name, _, _ := strings.Cut(rest, "/")
			add(scheme + ":" + name)
		}
	}
	return out
}

// hostOf is the host of a remote agent's URL, or the URL itself when it
// has none.
func hostOf(raw string) string {
	if u, err := url.Parse(raw); err == nil && u.Host != "" {
		return u.Hostname()
	}
	return raw
}
