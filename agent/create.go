package agent

import (
	"fmt"
	"strings"

	"github.com/agentry/agentry/policy"
	"github.com/agentry/agentry/spec"
	"github.com/agentry/agentry/tool"
)

// CreatedBy builds the agent for p under the host's creation rules:
// who may bring which agents and tools into being at run time (see
// policy.Creation). What p may not create is refused before anything
// is opened (no connector configured, no MCP server started): New
// returns an error that wraps ErrPolicyViolation and names each. The
// tools a source lists are checked once listed, and a tool an MCP
// server adds later that p may not create is not offered. Sub-agents
// and handoff targets are built under the same rules. p nil is a
// caller without a principal, whom a rule refuses unless it names "*".
//
// A server gives it for the agents its callers bring (an inline spec);
// the agents a host builds for itself need none.
func CreatedBy(p *policy.Principal, rules policy.Creation) Option {
	var who *policy.Principal
	if p != nil {
		cp := *p
		who = &cp
	}
	return func(o *options) { o.creator = &creator{who: who, rules: rules} }
}

// creator is who an agent is built for and the rules over what they
// may create.
type creator struct {
	who   *policy.Principal
	rules policy.Creation
}

// refused is why the creator may not create each of what.
func (c *creator) refused(what ...string) []string {
	if c == nil {
		return nil
	}
	return c.rules.Refused(c.who, what)
}

// admitSpec refuses a spec whose agent, connectors, servers or named
// tools the creator may not create, before any of them is opened.
func (c *creator) admitSpec(sp *spec.Spec) error {
	if c == nil {
		return nil
	}
	if probs := c.rules.Problems(); len(probs) > 0 {
		return fmt.Errorf("agent: CreatedBy: %s", strings.Join(probs, "; "))
	}
	return creationError(sp, c.refused(sp.Creates()...))
}

// admitTools refuses the tools the agent bound that its creator may not
// create (those its sources listed, above all), with what its
// sub-agents' builds refused. A sub-agent or handoff target is checked
// as the agent it is ("agent:NAME"), not again as a tool.
func (a *Agent) admitTools() error {
	c := a.o.creator
	if c == nil {
		return nil
	}
	reasons := a.subRefused
	for _, ts := range a.tools.specs {
		if b := a.tools.byName[ts.Name]; b.sub == nil && b.handoff == nil { // an agent is checked as one
			reasons = append(reasons, c.refused(a.toolItems(ts.Name, b.set)...)...)
		}
	}
	return creationError(a.spec, reasons)
}

// toolItems are what a tool is as a creation: "tool:NAME", and for a
// tool of an MCP server whose spec entry gives it a prefix, also the
// name the server gives it, so that a prefix the caller chose does not
// rename a tool out of a rule's reach.
func (a *Agent) toolItems(name string, set *toolSet) []string {
	items := []string{"tool:" + name}
	if set == nil {
		return items
	}
	for _, m := range a.spec.MCPServers {
		if m.Name == set.set.Name() && m.Prefix != "" {
			if own, ok := strings.CutPrefix(name, tool.NameFor(m.Prefix)); ok && own != "" {
				items = append(items, "tool:"+own)
			}
		}
	}
	return items
}

// creationError is a refusal of what reasons name, or nil for none.
func creationError(sp *spec.Spec, reasons []string) error {
	if len(reasons) == 0 {
		return nil
	}
	err := fmt.Errorf("%w: %s@%s: %s", ErrPolicyViolation, sp.AgentName, sp.Version, strings.Join(reasons, "; "))
	return withDetails(err, map[string]any{"rule": "creation"})
}
