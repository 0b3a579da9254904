package policy

import (
	"context"
	"fmt"
	"path"
	"slices"
	"sort"
	"strings"
)

// Principal is who a run acts for: a user and the roles the caller's
// authentication gave them (the server maps its API keys' roles onto
// it). It rides in the run's context (WithPrincipal).
type Principal struct {
	UserID string
	Roles  []string
}

// Has reports whether p holds one of roles; "*" in roles is anyone.
func (p *Principal) Has(roles []string) bool {
	if slices.Contains(roles, "*") {
		return true
	}
	if p == nil {
		return false
	}
	for _, r := range p.Roles {
		if slices.Contains(roles, r) {
			return true
		}
	}
	return false
}

type principalKey struct{}

// WithPrincipal puts p in ctx: the runs, tool calls and memory reads made
// with ctx act for p.
func WithPrincipal(ctx context.Context, p Principal) context.Context {
	return context.WithValue(ctx, principalKey{}, &p)
}

// PrincipalFrom is the principal WithPrincipal put in ctx, or nil.
func PrincipalFrom(ctx context.Context) *Principal {
	p, _ := ctx.Value(principalKey{}).(*Principal)
	return p
}

// Access says which roles may run the agent, have which tools called,
// and read which memory streams and collections (the Proposal's
// role-based access control). A list left out allows anyone; a list
// given allows only its roles ("*": anyone, a principal or not).
type Access struct {
	// Run is the roles that may run the agent.
	Run []string `json:"run,omitempty"`
	// Tools maps tool names (globs: "sql_*" covers the sql connector's
	// tools) to the roles that may have them called. A tool that no glob
	// names is anyone's.
	Tools map[string][]string `json:"tools,omitempty"`
	// Memory maps memory streams and collections (globs, after the
	// spec's ${var}s are filled: "user:*") to the roles that may read
	// them.
	Memory map[string][]string `json:"memory,omitempty"`
}

// CheckRun says whether p may run the agent: "" when it may, otherwise
// the rule ("access.run") and why not.
func (a *Access) CheckRun(p *Principal, agent string) (rule, reason string) {
	if a == nil || len(a.Run) == 0 || p.Has(a.Run) {
		return "", ""
	}
	return "access.run", fmt.Sprintf("%s may not run the agent %s: it is for the roles %s (policy.access.run)", who(p), agent, strings.Join(a.Run, ", "))
}

// CheckTool says whether p may have tool called.
func (a *Access) CheckTool(p *Principal, tool string) (rule, reason string) {
	if a == nil {
		return "", ""
	}
	if roles, glob, ok := match(a.Tools, tool); ok && !p.Has(roles) {
		return "access.tools", fmt.Sprintf("%s may not use the tool %s: %q is for the roles %s (policy.access.tools)", who(p), tool, glob, strings.Join(roles, ", "))
	}
	return "", ""
}

// CheckMemory says whether p may read the memory stream or collection
// name.
func (a *Access) CheckMemory(p *Principal, name string) (rule, reason string) {
	if a == nil {
		return "", ""
	}
	if roles, glob, ok := match(a.Memory, name); ok && !p.Has(roles) {
		return "access.memory", fmt.Sprintf("%s may not read the memory %s: %q is for the roles %s (policy.access.memory)", who(p), name, glob, strings.Join(roles, ", "))
	}
	return "", ""
}

// match is the roles of the most specific glob of rules that matches
// name (the longest; equal lengths in order).
func match(rules map[string][]string, name string) (roles []string, glob string, ok bool) {
	globs := make([]string, 0, len(rules))
	for g := range rules {
		globs = append(globs, g)
	}
	sort.Slice(globs, func(i, j int) bool {
		if len(globs[i]) != len(globs[j]) {
			return len(globs[i]) > len(globs[j])
		}
		return globs[i] < globs[j]
	})
	for _, g := range globs {
		if hit, _ := path.Match(g, name); hit {
			return rules[g], g, true
		}
	}
	return nil, "", false
}

// who names a principal in a reason.
func who(p *Principal) string {
	switch {
	case p == nil:
		return "a caller without roles"
	case p.UserID != "":
		return "user " + p.UserID + " (roles: " + strings.Join(p.Roles, ", ") + ")"
	}
	return "a caller with the roles " + strings.Join(p.Roles, ", ")
}

func (a *Access) check(bad func(string, ...any)) {
	for _, r := range a.Run {
		if r == "" {
			bad("access.run: an empty role")
		}
	}
	for field, m := range map[string]map[string][]string{"access.tools": a.Tools, "access.memory": a.Memory} {
		for g, roles := range m {
			if _, err := path.Match(g, ""); err != nil || g == "" {
				bad("%s %q: not a glob", field, g)
			}
			if len(roles) == 0 {
				bad("%s.%s: name at least one role (\"*\" for anyone)", field, g)
			}
		}
	}
}

func cloneRoles(m map[string][]string) map[string][]string {
	if m == nil {
		return nil
	}
	out := make(map[string][]string, len(m))
	for k, v := range m {
		out[k] = slices.Clone(v)
	}
	return out
}
