package server

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/agentry/agentry/agent"
	"github.com/agentry/agentry/policy"
	"github.com/agentry/agentry/spec"
	"github.com/agentry/agentry/store"
)

// creation is the server's creation rules: Config.Create over a last
// rule of its own, "*" for an admin, so that what the operator's rules
// do not name stays an admin's (a rule that lets runners create agents
// does not also let them start MCP servers).
func (s *Server) creation() policy.Creation { return s.create }

// creationRules are rules with the server's last rule under them.
func creationRules(rules policy.Creation) policy.Creation {
	out := policy.Creation{"*": {string(RoleAdmin)}}
	for g, roles := range rules {
		out[g] = slices.Clone(roles)
	}
	return out
}

// checkCreation names what is wrong with rules: a glob without roles,
// or a role the server does not give.
func checkCreation(rules policy.Creation) error {
	probs := rules.Problems()
	for _, g := range slices.Sorted(maps.Keys(rules)) {
		for _, r := range rules[g] {
			if r != "*" && Role(r).rank() == 0 {
				probs = append(probs, fmt.Sprintf("creation %q: role %q is not viewer, runner, admin or *", g, r))
			}
		}
	}
	if len(probs) > 0 {
		return fmt.Errorf("server: Create: %s", strings.Join(probs, "; "))
	}
	return nil
}

// creator is the caller as the creation rules see it: its role and
// every role below it, since each role may do what the ones before it
// may ("runner" in a rule admits an admin too).
func (c *caller) creator() *policy.Principal {
	p := c.principal()
	p.Roles = nil
	for _, r := range []Role{RoleViewer, RoleRunner, RoleAdmin} {
		if c.at(r) && c.role != "" {
			p.Roles = append(p.Roles, string(r))
		}
	}
	return &p
}

// createdBy builds an agent the caller brings (an inline spec) under the
// server's creation rules.
func (s *Server) createdBy(c *caller) agent.Option { return agent.CreatedBy(c.creator(), s.creation()) }

// mayCreate says why the caller may not create what sp would bring into
// being, before anything is built ("" when it may): for a decision on a
// run another process drives, whose agent this server does not build.
func (s *Server) mayCreate(c *caller, sp *spec.Spec) string {
	why := s.creation().Refused(c.creator(), sp.Creates())
	if len(why) == 0 {
		return ""
	}
	return strings.Join(why, "; ")
}

// servedRun says whether a stored run, whose start record holds stored,
// is of a served agent: the served agent of its name and version has
// that very spec, or it is a served agent as a caller's request made it
// (a response format's schema, the caller's tools: its version the
// served one's with their digests after "-schema." or "-tools.", its spec
// the served one's with them). An inline spec may take a served agent's
// name and version; it is still the caller's, checked as one.
func (s *Server) servedRun(run store.Run, stored json.RawMessage) bool {
	base := run.Version
	for {
		i := max(strings.LastIndex(base, "-schema."), strings.LastIndex(base, "-tools."))
		if i < 0 || len(base)-strings.LastIndexByte(base, '.')-1 != 8 {
			break
		}
		base = base[:i]
	}
	a, err := s.cfg.Agents.Get(run.Name + "@" + base)
	if err != nil {
		return false
	}
	sp := a.Spec()
	if base != run.Version {
		var made spec.Spec
		if json.Unmarshal(stored, &made) != nil {
			return false
		}
		if len(sp.OutputSchema) == 0 {
			sp.OutputSchema = made.OutputSchema
		}
		sp.CallerTools, sp.Version = made.CallerTools, run.Version
	}
	own, err := json.Marshal(&sp)
	return err == nil && bytes.Equal(policy.Secrets().Bytes(own), stored) // the log keeps it redacted
}
