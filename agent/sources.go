package agent

import (
	"context"
	"fmt"
	"sync/atomic"

	"github.com/agentry/agentry/event"
	"github.com/agentry/agentry/internal/journal"
	"github.com/agentry/agentry/llm"
	"github.com/agentry/agentry/tool"
)

// toolTable is the tools an agent offers: by name for calls, in order for
// the model.
type toolTable struct {
	byName map[string]*binding
	specs  []llm.ToolSpec
}

// table is the agent's tools now: as built, or as its sources' last
// change (an MCP server's list_changed) left them.
func (a *Agent) table() *toolTable {
	if t := a.live.Load(); t != nil {
		return t
	}
	return &a.tools
}

// toolSet is a set of tools a source gave the agent (an MCP server's):
// opened when the agent is built, shared by its runs, closed by Close.
type toolSet struct {
	set  tool.Set
	seen atomic.Uint64 // the set's Changes when its tools were bound
}

// openSources opens the sources the spec's tools entries name, by
// scheme ("mcp", "a2a"): the agent's own (WithSource), or the one a
// linked package registered. An entry of a source no package registered
// is a problem naming the import. "agent:" entries are the agent's own
// sub-agents, not a source's.
func (a *Agent) openSources(o options) (map[string][]*toolSet, []string) {
	reqs := map[string]*tool.SourceRequest{}
	var schemes []string
	for i, entry := range a.spec.Tools {
		scheme := tool.SchemeOf(entry)
		if scheme == "" || scheme == "agent" {
			continue
		}
		r := reqs[scheme]
		if r == nil {
			r = &tool.SourceRequest{Spec: journal.JSON(a.spec), BaseDir: o.baseDir, Logger: a.logger}
			reqs[scheme] = r
			schemes = append(schemes, scheme)
		}
		r.Entries, r.Index = append(r.Entries, entry), append(r.Index, i)
	}
	var probs []string
	out := map[string][]*toolSet{}
	for _, scheme := range schemes {
		r := reqs[scheme]
		src, ok := o.sources[scheme]
		if !ok {
			var err error
			if src, err = tool.SourceOf(scheme); err != nil {
				for k, entry := range r.Entries {
					probs = append(probs, fmt.Sprintf("tools[%d] %q: %v", r.Index[k], entry, err))
				}
				continue
			}
		}
		sets, err := src.Open(context.Background(), *r)
		for _, s := range sets {
			ts := &toolSet{set: s}
			a.closers = append(a.closers, s.Close)
			a.sets = append(a.sets, ts)
			out[scheme] = append(out[scheme], ts)
		}
		probs = append(probs, lines(err)...)
	}
	return out, probs
}

// lines are the messages of err: one for each error errors.Join joined.
func lines(err error) []string {
	if err == nil {
		return nil
	}
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		var out []string
		for _, e := range j.Unwrap() {
			out = append(out, lines(e)...)
		}
		return out
	}
	return []string{err.Error()}
}

// WithSource gives the agent its own source of the tools entries of
// scheme, in place of the one a package registered: a source made with
// options a spec cannot give, as mcp.Source(fn) makes one whose MCP
// clients take an OAuth handler or an HTTP client.
func WithSource(scheme string, s tool.Source) Option {
	return func(o *options) {
		if o.sources == nil {
			o.sources = map[string]tool.Source{}
		}
		o.sources[scheme] = s
	}
}

// bindSets binds the tools of sets.
func (a *Agent) bindSets(sets []*toolSet) []string {
	var probs []string
	for _, s := range sets {
		s.seen.Store(s.set.Changes())
		tools, err := s.set.Tools(context.Background())
		if err != nil {
			probs = append(probs, fmt.Sprintf("%s: %v", s.set.Name(), err))
			continue
		}
		for _, t := range tools {
			if err := a.addBinding(&binding{tool: t, set: s}); err != nil {
				probs = append(probs, fmt.Sprintf("tools: %s's tool: %v (a prefix of its server's keeps them apart)", s.set.Name(), err))
			}
		}
	}
	return probs
}

// refreshTools offers the turn the agent's tools as its MCP servers now
// list them, when one said they changed. Calls find their tools in the
// agent's table as it is when they run.
func (r *run) refreshTools() {
	t := r.a.refreshSets(r.ctx)
	if _, react := r.planner.(reactPlanner); !react {
		r.req.Tools = t.specs
	}
}

// refreshSets lists again the tools of the sets that changed since they
// were bound and makes them the agent's table. A set that cannot list
// them keeps its last tools; a new tool whose name is taken, or that the
// agent's creator may not create (CreatedBy), is left out; each is
// logged.
func (a *Agent) refreshSets(ctx context.Context) *toolTable {
	if !a.setsChanged() {
		return a.table()
	}
	a.setsMu.Lock()
	defer a.setsMu.Unlock()
	if !a.setsChanged() {
		return a.table()
	}
	cur := a.table()
	next := &toolTable{byName: make(map[string]*binding, len(cur.byName))}
	add := func(b *binding) bool {
		if _, dup := next.byName[b.info.Name]; dup {
			return false
		}
		next.byName[b.info.Name] = b
		next.specs = append(next.specs, specOf(b.info))
		return true
	}
	for _, ts := range cur.specs {
		if b := cur.byName[ts.Name]; b.set == nil {
			add(b)
		}
	}
	for _, s := range a.sets {
		seen := s.set.Changes()
		tools, err := s.set.Tools(ctx)
		if err != nil {
			a.logger.Warn("tools not listed again; the last ones stay", "set", s.set.Name(), "error", err)
			for _, ts := range cur.specs {
				if b := cur.byName[ts.Name]; b.set == s {
					add(b)
				}
			}
			continue
		}
		for _, t := range tools {
			if why := a.o.creator.refused(a.toolItems(t.Info().Name, s)...); len(why) > 0 {
				a.logger.Warn("tool left out: the agent's creator may not create it", "set", s.set.Name(), "name", t.Info().Name, "reason", why[0])
				continue
			}
			b := cur.byName[t.Info().Name]
			if b == nil || b.set != s || !sameInfo(b.info, t.Info()) {
				b = &binding{tool: t, set: s, info: t.Info(), label: "tool:" + t.Info().Name}
				b.handler, b.inner = a.toolChain(b.info)
			}
			if !add(b) {
				a.logger.Warn("tool left out: its name is taken", "set", s.set.Name(), "name", b.info.Name)
			}
		}
		s.seen.Store(seen)
	}
	a.live.Store(next)
	return next
}

func (a *Agent) setsChanged() bool {
	for _, s := range a.sets {
		if s.set.Changes() != s.seen.Load() {
			return true
		}
	}
	return false
}

func sameInfo(x, y tool.Info) bool {
	return x.Name == y.Name && x.Description == y.Description && string(x.Parameters) == string(y.Parameters) &&
		x.Idempotency == y.Idempotency && x.Risk == y.Risk
}

// ReportProgress makes what a tool reports of a call a tool_progress
// event (tool.ProgressReporter).
func (r *run) ReportProgress(c *tool.Call, p event.Progress) {
	if !r.s.bus.Active() {
		return
	}
	r.emit(event.Event{Type: event.ToolProgress, Tool: &event.ToolCall{ID: c.ID, Name: c.Name}, Progress: &p})
}
