// Package policy is the safety layer of agentry, as data and as checks
// that know nothing of agents: the spec field "policy"
// parsed and checked strictly, the rules it compiles to (which tools may
// run, which need a person's approval, how often, what content is
// blocked or redacted, which hosts the HTTP tools may reach), and the
// matchers that find secrets and personal data in text (see Redactor).
package policy

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"maps"
	"path"
	"regexp"
	"slices"
	"strings"

	"github.com/agentry/agentry/internal/strictjson"
)

// Policy is the spec field "policy".
type Policy struct {
	Tools          ToolRules            `json:"tools,omitzero"`
	Approval       Approval             `json:"approval,omitzero"`
	RateLimits     map[string]RateLimit `json:"rate_limits,omitempty"`
	ContentFilters []ContentFilter      `json:"content_filters,omitempty"`
	Network        Network              `json:"network,omitzero"`
	// Access says which roles may run the agent, use its tools and read
	// its memory (see Principal).
	Access *Access `json:"access,omitempty"`
	// PrivateTools (globs) are the tools whose inputs and outputs are
	// kept out of events, logs, the Result's trace and the stored log: a
	// digest stands in for each (see Private).
	PrivateTools []string `json:"private_tools,omitempty"`
}

// ToolRules say which tools the model may call, by name or `*` glob. A
// tool denied, or not allowed when Allow is given, is a policy_violation.
type ToolRules struct {
	Allow []string `json:"allow,omitempty"`
	Deny  []string `json:"deny,omitempty"`
}

// Approval names the tools (globs) whose calls wait for a person.
type Approval struct {
	Tools []string `json:"tools,omitempty"`
}

// RateLimit bounds the calls of a tool (or of every tool, under "*"):
// PerSecond or PerMinute, with Burst calls at once (default 1).
type RateLimit struct {
	PerSecond float64 `json:"per_second,omitempty"`
	PerMinute float64 `json:"per_minute,omitempty"`
	Burst     int     `json:"burst,omitempty"`
}

// Target is where a content filter looks.
type Target string

// The targets of content filters.
const (
	ToolInput   Target = "tool_input"
	MemoryWrite Target = "memory_write"
	Output      Target = "output"
	Prompt      Target = "prompt"
	// Input is a run's own input and the prompt rendered from it, before
	// the first model call.
	Input Target = "input"
)

// Action is what a content filter does with what it finds.
type Action string

// The actions of content filters.
const (
	Block  Action = "block"
	Redact Action = "redact"
)

// ContentFilter finds content with a built-in matcher (Match: "secrets"
// or "pii") or a regular expression (Pattern), in the targets On, and
// blocks or redacts it.
type ContentFilter struct {
	Name    string   `json:"name"`
	Match   string   `json:"match,omitempty"`
	Pattern string   `json:"pattern,omitempty"`
	On      []Target `json:"on"`
	Action  Action   `json:"action"`
}

// Network limits the HTTP tools: the hosts they may reach (globs; none
// given: any public host) and whether private addresses are allowed.
// IdempotencyKeyHosts (globs) are the hosts known to keep one effect per
// Idempotency-Key: a request of unknown outcome to one of them is sent
// again with its key after a crash; to any other host it waits for a
// person's approval.
type Network struct {
	AllowHosts          []string `json:"allow_hosts,omitempty"`
	AllowPrivate        bool     `json:"allow_private,omitempty"`
	IdempotencyKeyHosts []string `json:"idempotency_key_hosts,omitempty"`
}

// Error lists the problems of a policy, each naming its field.
type Error struct {
	Problems []string
}

func (e *Error) Error() string { return "policy: " + strings.Join(e.Problems, "; ") }

// Parse reads a policy strictly: an unknown field, a wrong type, a bad
// glob, regular expression, rate, target or action is an *Error naming
// the field.
func Parse(data []byte) (*Policy, error) {
	var p Policy
	if err := strictjson.Decode(data, &p); err != nil {
		return nil, &Error{Problems: []string{err.Error()}}
	}
	if probs := p.Check(); len(probs) > 0 {
		return nil, &Error{Problems: probs}
	}
	return &p, nil
}

// Check returns the problems of p, each naming its field ("policy." is
// left to the caller).
func (p *Policy) Check() []string {
	var probs []string
	bad := func(format string, args ...any) { probs = append(probs, fmt.Sprintf(format, args...)) }
	globs := func(field string, gs []string) {
		for i, g := range gs {
			if g == "" {
				bad("%s[%d]: empty pattern", field, i)
			} else if _, err := path.Match(g, ""); err != nil {
				bad("%s[%d] %q: %v", field, i, g, err)
			}
		}
	}
	if p.Access != nil {
		p.Access.check(bad)
	}
	globs("tools.allow", p.Tools.Allow)
	globs("tools.deny", p.Tools.Deny)
	globs("approval.tools", p.Approval.Tools)
	globs("private_tools", p.PrivateTools)
	globs("network.allow_hosts", p.Network.AllowHosts)
	globs("network.idempotency_key_hosts", p.Network.IdempotencyKeyHosts)
	for _, name := range slices.Sorted(maps.Keys(p.RateLimits)) {
		r := p.RateLimits[name]
		f := "rate_limits." + name
		switch {
		case r.PerSecond < 0 || r.PerMinute < 0 || r.Burst < 0:
			bad("%s: rates and burst must not be negative", f)
		case r.PerSecond > 0 && r.PerMinute > 0:
			bad("%s: give per_second or per_minute, not both", f)
		case r.PerSecond == 0 && r.PerMinute == 0:
			bad("%s: give per_second or per_minute", f)
		}
	}
	seen := map[string]bool{}
	for i, cf := range p.ContentFilters {
		f := fmt.Sprintf("content_filters[%d]", i)
		if cf.Name == "" {
			bad("%s.name: required", f)
		} else if seen[cf.Name] {
			bad("%s.name %q: used twice", f, cf.Name)
		}
		seen[cf.Name] = true
		switch {
		case cf.Match == "" && cf.Pattern == "":
			bad("%s: give match (secrets or pii) or pattern", f)
		case cf.Match != "" && cf.Pattern != "":
			bad("%s: give match or pattern, not both", f)
		case cf.Match != "" && cf.Match != "secrets" && cf.Match != "pii":
			bad("%s.match %q: want secrets or pii", f, cf.Match)
		case cf.Pattern != "":
			if _, err := regexp.Compile(cf.Pattern); err != nil {
				bad("%s.pattern: %v", f, err)
			}
		}
		if len(cf.On) == 0 {
			bad("%s.on: name at least one of input, tool_input, memory_write, output, prompt", f)
		}
		for j, t := range cf.On {
			if t != ToolInput && t != MemoryWrite && t != Output && t != Prompt && t != Input {
				bad("%s.on[%d] %q: want input, tool_input, memory_write, output or prompt", f, j, t)
			}
		}
		if cf.Action != Block && cf.Action != Redact {
			bad("%s.action %q: want block or redact", f, cf.Action)
		}
	}
	return probs
}

// Clone returns a deep copy of p.
func (p *Policy) Clone() *Policy {
	if p == nil {
		return nil
	}
	cp := *p
	cp.Tools.Allow, cp.Tools.Deny = slices.Clone(p.Tools.Allow), slices.Clone(p.Tools.Deny)
	cp.Approval.Tools = slices.Clone(p.Approval.Tools)
	cp.PrivateTools = slices.Clone(p.PrivateTools)
	cp.RateLimits = maps.Clone(p.RateLimits)
	if p.Access != nil {
		a := *p.Access
		a.Run = slices.Clone(a.Run)
		a.Tools, a.Memory = cloneRoles(a.Tools), cloneRoles(a.Memory)
		cp.Access = &a
	}
	cp.ContentFilters = make([]ContentFilter, len(p.ContentFilters))
	for i, f := range p.ContentFilters {
		f.On = slices.Clone(f.On)
		cp.ContentFilters[i] = f
	}
	if p.ContentFilters == nil {
		cp.ContentFilters = nil
	}
	cp.Network.AllowHosts = slices.Clone(p.Network.AllowHosts)
	cp.Network.IdempotencyKeyHosts = slices.Clone(p.Network.IdempotencyKeyHosts)
	return &cp
}

// Matches reports whether name matches one of the globs.
func Matches(globs []string, name string) bool {
	for _, g := range globs {
		if ok, _ := path.Match(g, name); ok {
			return true
		}
	}
	return false
}

type networkKey struct{}

// WithNetwork returns ctx carrying the network rules of the agent whose
// tool call it is: the HTTP tools read them with NetworkFrom.
func WithNetwork(ctx context.Context, n *Network) context.Context {
	return context.WithValue(ctx, networkKey{}, n)
}

// NetworkFrom returns the network rules ctx carries, or nil.
func NetworkFrom(ctx context.Context) *Network {
	n, _ := ctx.Value(networkKey{}).(*Network)
	return n
}

// KeepsIdempotencyKeys reports whether host is one the rules name as
// keeping one effect per Idempotency-Key: none unless named.
func (n *Network) KeepsIdempotencyKeys(host string) bool {
	return n != nil && Matches(n.IdempotencyKeyHosts, strings.ToLower(host))
}

// AllowsHost reports whether the rules let a tool reach host: any host
// when AllowHosts is empty.
func (n *Network) AllowsHost(host string) bool {
	return n == nil || len(n.AllowHosts) == 0 || Matches(n.AllowHosts, strings.ToLower(host))
}

// privatePrefix starts what stands in for a private tool's input or
// output.
const privatePrefix = "private:sha256:"

// Private is what stands in for text a private tool took or gave: its
// digest, so that two runs can still be compared (a replay finds a
// divergence) without the text. It is idempotent: a digest stays itself.
func Private(text string) string {
	if strings.HasPrefix(text, privatePrefix) || text == "" {
		return text
	}
	sum := sha256.Sum256([]byte(text))
	return privatePrefix + hex.EncodeToString(sum[:16])
}

// PrivateJSON is Private for a JSON value: the digest as a JSON string.
func PrivateJSON(v []byte) []byte {
	if len(v) == 0 || bytes.HasPrefix(v, []byte(`"`+privatePrefix)) {
		return v
	}
	b, _ := json.Marshal(Private(string(v)))
	return b
}
