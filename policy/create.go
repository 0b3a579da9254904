package policy

import (
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"
	"unicode/utf8"
)

// Creation says which roles may bring agents and tools into being at
// run time (the Proposal seed's role-based access control for tool
// registration and agent creation): the host's rule, over every spec
// built for a caller, not a spec's own. Its keys are globs of what is
// created, its values the roles that may create it ("*": anyone):
//
//	agent:NAME         an agent built from a spec, a sub-agent or
//	                   handoff target it builds
//	connector:KIND     a connector a spec configures (shell, sql, …)
//	mcp:COMMAND ARGS   an MCP server a spec makes the host run
//	mcp:HOST           an MCP server a spec makes the host reach
//	a2a:HOST           a remote A2A agent a spec reaches
//	memory:BACKEND     a memory backend of a spec's own
//	tool:NAME          a tool an agent binds, whatever gave it: a
//	                   connector, a registry, an MCP server's list, now
//	                   or later
//
// The most specific glob that matches wins (the one with the most
// characters that are not wildcards; "*" matches any run of characters,
// "/" too, "?" any one); what no glob names may
// be created by anyone. Like every access rule, a rule refuses a caller without a
// principal unless it names "*".
type Creation map[string][]string

// Refused is why p may not create each of what it may not, in the order
// of what; nil when it may create all of it.
func (c Creation) Refused(p *Principal, what []string) []string {
	if len(c) == 0 {
		return nil
	}
	globs := c.globs()
	var out []string
	for _, w := range what {
		for _, g := range globs {
			if !globMatch(g, w) {
				continue
			}
			if roles := c[g]; !p.Has(roles) {
				out = append(out, fmt.Sprintf("%s may not create %s: %q is for the roles %s", who(p), w, g, strings.Join(roles, ", ")))
			}
			break
		}
	}
	return out
}

// Problems are what is wrong with the rules, each naming its glob: an
// empty glob, or one that names no role.
func (c Creation) Problems() []string {
	var probs []string
	for _, g := range slices.Sorted(maps.Keys(c)) {
		if g == "" {
			probs = append(probs, "creation: an empty glob")
		}
		if len(c[g]) == 0 || slices.Contains(c[g], "") {
			probs = append(probs, fmt.Sprintf("creation %q: name at least one role, none empty (\"*\" for anyone)", g))
		}
	}
	return probs
}

// globs are c's globs, the most specific first: the one with the most
// characters that are not wildcards ("tool:http_get" before
// "tool:*********").
func (c Creation) globs() []string {
	globs := slices.Collect(maps.Keys(c))
	literal := func(g string) int { return utf8.RuneCountInString(g) - strings.Count(g, "*") - strings.Count(g, "?") }
	sort.Slice(globs, func(i, j int) bool {
		if li, lj := literal(globs[i]), literal(globs[j]); li != lj {
			return li > lj
		}
		return globs[i] < globs[j]
	})
	return globs
}

// globMatch matches name against a glob whose "*" spans any run of
// characters, "/" and ":" too, so that "mcp:*" covers every MCP server
// and "a2a:*.example.com" every host under one domain; "?" is any one
// character.
func globMatch(glob, name string) bool {
	// The classic two-pointer match over runes: on a mismatch, the last
	// star takes one more character.
	g, n := []rune(glob), []rune(name)
	gi, ni, star, mark := 0, 0, -1, 0
	for ni < len(n) {
		switch {
		case gi < len(g) && (g[gi] == '?' || g[gi] == n[ni]):
			gi++
			ni++
		case gi < len(g) && g[gi] == '*':
			star, mark = gi, ni
			gi++
		case star >= 0:
			mark++
			gi, ni = star+1, mark
		default:
			return false
		}
	}
	for gi < len(g) && g[gi] == '*' {
		gi++
	}
	return gi == len(g)
}
