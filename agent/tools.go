package agent

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/agentry/agentry/llm"
	"github.com/agentry/agentry/memory/memtool"
	"github.com/agentry/agentry/policy"
	"github.com/agentry/agentry/spec"
	"github.com/agentry/agentry/tool"
)

func (a *Agent) bindTools(o options) []string {
	var problems []string
	a.tools.byName = make(map[string]*binding, len(a.spec.Tools))
	conn, cprobs := a.connectorTools(o)
	problems = append(problems, cprobs...)
	sourced, sprobs := a.openSources(o)
	problems = append(problems, sprobs...)
	var mem map[string]tool.Tool
	if a.mem != nil {
		mem = memtool.Tools()
	}
	if a.mem == nil {
		for i, name := range a.spec.Tools {
			if memtool.Is(name) {
				problems = append(problems, fmt.Sprintf("tools[%d] %q: a memory tool needs the spec's memory field", i, name))
			}
		}
	}
	for i, name := range a.spec.Tools {
		var b *binding
		if ref, ok := strings.CutPrefix(name, "agent:"); ok {
			sub, owned, err := a.buildSub(ref, o)
			if errors.Is(err, ErrPolicyViolation) {
				a.subRefused = append(a.subRefused, fmt.Sprintf("tools[%d] %q: %s", i, name, strings.TrimPrefix(err.Error(), ErrPolicyViolation.Error()+": ")))
				continue
			}
			if err != nil {
				problems = append(problems, fmt.Sprintf("tools[%d] %q: %v", i, name, err))
				continue
			}
			if owned {
				a.closers = append(a.closers, sub.Close)
			}
			b = &binding{tool: subTool{sub}, sub: sub}
		} else if scheme := tool.SchemeOf(name); scheme != "" {
			// The first entry of a source binds the tools of all its
			// entries, as its sets give them.
			if sets, first := sourced[scheme]; first {
				delete(sourced, scheme)
				problems = append(problems, a.bindSets(sets)...)
			}
			continue
		} else {
			t := namedTool(o, name, conn, mem)
			if t == nil {
				problems = append(problems, fmt.Sprintf("tools[%d]: unknown tool %q%s%s", i, name, knownTools(o, conn, mem), a.connectorHint(name)))
				continue
			}
			b = &binding{tool: t}
		}
		if err := a.addBinding(b); err != nil {
			problems = append(problems, fmt.Sprintf("tools[%d]: %v", i, err))
		}
	}
	if a.mem != nil && a.mem.spec.Tools {
		for _, name := range memtool.MemoryNames() {
			if _, bound := a.tools.byName[name]; !bound {
				if err := a.addBinding(&binding{tool: mem[name]}); err != nil {
					problems = append(problems, fmt.Sprintf("memory.tools: %v", err))
				}
			}
		}
	}
	return append(problems, a.namesTools()...)
}

// namedTool is the tool a plain tools entry names: a configured
// connector's, a memory tool, one made in code (Use), or the registry's;
// nil for none.
func namedTool(o options, name string, conn, mem map[string]tool.Tool) tool.Tool {
	if t := conn[name]; t != nil {
		return t
	}
	if t := mem[name]; t != nil {
		return t
	}
	for _, u := range o.used {
		if u.Info().Name == name {
			return u
		}
	}
	if o.registry != nil {
		if t, ok := o.registry.Get(name); ok {
			return t
		}
	}
	return nil
}

// namesTools checks that the limits and retries the spec gives tools by
// name name the agent's tools.
func (a *Agent) namesTools() []string {
	var problems []string
	for name := range a.limits.ToolTimeoutsMS {
		if _, ok := a.tools.byName[name]; !ok {
			problems = append(problems, fmt.Sprintf("limits.tool_timeouts_ms.%s: the agent has no tool %q", name, name))
		}
	}
	for _, name := range slices.Sorted(maps.Keys(a.retry.Tools)) {
		if _, ok := a.tools.byName[name]; !ok {
			problems = append(problems, fmt.Sprintf("retry.tools.%s: the agent has no tool %q", name, name))
		}
	}
	return problems
}

// connectorTools builds the tools of the connectors the spec configures,
// by name: they take precedence over the registry's.
func (a *Agent) connectorTools(o options) (map[string]tool.Tool, []string) {
	if len(a.spec.Connectors) == 0 {
		return nil, nil
	}
	var probs []string
	out := map[string]tool.Tool{}
	for _, name := range slices.Sorted(maps.Keys(a.spec.Connectors)) {
		tools, closer, err := tool.OpenConnector(name, a.spec.Connectors[name], o.baseDir)
		if closer != nil {
			a.closers = append(a.closers, closer)
		}
		if err != nil {
			probs = append(probs, fmt.Sprintf("connectors.%s: %v", name, err))
			continue
		}
		for _, t := range tools {
			out[t.Info().Name] = t
		}
	}
	return out, probs
}

// addBinding gives b its handler chain and offers it to the model.
func (a *Agent) addBinding(b *binding) error {
	b.info = b.tool.Info()
	b.label = "tool:" + b.info.Name
	if _, dup := a.tools.byName[b.info.Name]; dup {
		return fmt.Errorf("two tools are named %q", b.info.Name)
	}
	b.handler, b.inner = a.toolChain(b.info)
	a.tools.byName[b.info.Name] = b
	a.tools.specs = append(a.tools.specs, specOf(b.info))
	return nil
}

// specOf is how a tool is offered to models.
func specOf(info tool.Info) llm.ToolSpec {
	return llm.ToolSpec{Name: info.Name, Description: describe(info), Parameters: info.Parameters}
}

// toolChain is the handler of one tool: its execute_tool span, the user's middleware, then the
// spec's policy, then the run log (which passes calls through unless the
// run is durable), then retry -> timeout -> panic recovery -> truncation
// -> the tool. Retries
// wrap the timeout so that each attempt has its own; truncation sits
// innermost so that every layer sees the whole result. inner is the
// part inside the run log, which runs a call (Exec runs a dispatched
// call with it).
func (a *Agent) toolChain(info tool.Info) (handler, inner tool.Handler) {
	inner = tool.Chain(tool.Handle,
		tool.Retry(a.toolRetryPolicy(info.Name), nil),
		tool.Timeout(a.toolTimeout(info)),
		tool.Recover(nil), // the run logs the panic, with its attributes and the stack
		tool.Truncate(a.limits.MaxObservationBytes))
	mws := make([]tool.Middleware, 0, len(a.o.toolMW)+3)
	mws = append(mws, a.traceTools)
	mws = append(mws, a.o.toolMW...)
	if a.spec.Policy != nil || len(a.o.rules) > 0 {
		if a.policyMW == nil {
			a.policyMW = policy.Tools(a.spec.Policy, a.o.rules...) // one for all tools: "*" limits them together
		}
		mws = append(mws, a.policyMW)
	}
	mws = append(mws, journalTools)
	return tool.Chain(inner, mws...), inner
}

func knownTools(o options, conn, mem map[string]tool.Tool) string {
	var names []string
	if o.registry != nil {
		names = o.registry.Names()
	}
	for _, u := range o.used {
		names = append(names, u.Info().Name)
	}
	names = slices.AppendSeq(slices.AppendSeq(names, maps.Keys(conn)), maps.Keys(mem))
	if len(names) == 0 {
		return " (no tools are registered)"
	}
	slices.Sort(names)
	return " (known: " + strings.Join(slices.Compact(names), ", ") + ")"
}

// withToolProblems adds to the problems of a spec that does not check
// those of its tools, so that all are reported at once: a spec read
// (s) with opts' tools.
func withToolProblems(err error, s *spec.Spec, opts []Option) error {
	if s == nil {
		return err
	}
	o := options{}
	for _, opt := range opts {
		opt(&o)
	}
	return toolProblems(err, s, o)
}

// toolProblems adds to a spec error the plain tool names that name no
// tool o knows: what binding the tools would find, found without
// opening anything. Names a configured connector may offer are not
// judged: only opening it tells.
func toolProblems(err error, sp *spec.Spec, o options) error {
	var se *spec.Error
	if !errors.As(err, &se) || len(sp.Connectors) > 0 {
		return err
	}
	for i, name := range sp.Tools {
		if strings.HasPrefix(name, "agent:") || tool.SchemeOf(name) != "" || memtool.Is(name) || namedTool(o, name, nil, nil) != nil {
			continue
		}
		se.Problems = append(se.Problems, fmt.Sprintf("tools[%d]: unknown tool %q%s", i, name, knownTools(o, nil, nil)))
	}
	return err
}

// toolTimeout: a per-tool limit of the spec wins, then the tool's own
// timeout, then the spec's tool_timeout_ms.
func (a *Agent) toolTimeout(info tool.Info) time.Duration {
	if ms, ok := a.limits.ToolTimeoutsMS[info.Name]; ok {
		return time.Duration(ms) * time.Millisecond
	}
	if info.Timeout > 0 {
		return info.Timeout
	}
	return time.Duration(a.limits.ToolTimeoutMS) * time.Millisecond
}

// describe is a tool's description as models see it: with its examples.
func describe(info tool.Info) string {
	if len(info.Examples) == 0 {
		return info.Description
	}
	var b strings.Builder
	b.WriteString(info.Description)
	for i, ex := range info.Examples {
		if i == 0 {
			if info.Description != "" {
				b.WriteString("\n")
			}
			b.WriteString("Example arguments: ")
		} else {
			b.WriteString("; ")
		}
		b.Write(ex)
	}
	return b.String()
}

// connectorHint says, of a tool a configured connector's name begins
// ("sql_exec" of "sql"), that the connector offers it only when its
// configuration turns it on.
func (a *Agent) connectorHint(name string) string {
	for c := range a.spec.Connectors {
		if strings.HasPrefix(name, c+"_") {
			return fmt.Sprintf("; the %s connector's configuration (connectors.%s) does not turn it on", c, c)
		}
	}
	return ""
}
