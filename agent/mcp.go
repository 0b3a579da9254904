package agent

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/agentry/agentry/event"
	"github.com/agentry/agentry/llm"
	"github.com/agentry/agentry/spec"
	"github.com/agentry/agentry/tool"
	"github.com/agentry/agentry/tool/mcp"
)

// toolTable is the tools an agent offers: by name for calls, in order for
// the model.
type toolTable struct {
	byName map[string]*binding
	specs  []llm.ToolSpec
}

// table is the agent's tools now: as built, or as its MCP servers' last
// list_changed left them.
func (a *Agent) table() *toolTable {
	if t := a.live.Load(); t != nil {
		return t
	}
	return &a.tools
}

// mcpSet is one MCP server an agent uses: its client (opened when the
// agent is built, shared by its runs, closed by Close) and which of its
// tools the spec takes.
type mcpSet struct {
	client *mcp.Client
	all    bool            // mcp:SERVER/*
	names  map[string]bool // mcp:SERVER/TOOL, by the server's name or the model's
	seen   atomic.Uint64   // the client's Changes when its tools were bound
}

func (s *mcpSet) takes(t *mcp.Tool) bool {
	return s.all || s.names[t.Remote()] || s.names[t.Info().Name]
}

// openMCP opens, side by side, each MCP server the spec's tools entries
// name. A server that fails is a problem naming it.
func (a *Agent) openMCP(o options) (map[string]*mcpSet, []string) {
	sets := map[string]*mcpSet{}
	for _, entry := range a.spec.Tools {
		server, name, ok := spec.ParseMCPTool(entry)
		if !ok {
			continue
		}
		s := sets[server]
		if s == nil {
			s = &mcpSet{names: map[string]bool{}}
			sets[server] = s
		}
		if name == "*" {
			s.all = true
		} else {
			s.names[name] = true
		}
	}
	if len(sets) == 0 {
		return nil, nil
	}
	var wg sync.WaitGroup
	var mu sync.Mutex
	var probs []string
	for _, server := range slices.Sorted(maps.Keys(sets)) {
		cfg := *a.spec.MCPServer(server)
		var mo mcp.Options
		if o.mcp != nil {
			mo = o.mcp(cfg)
		}
		if mo.BaseDir == "" {
			mo.BaseDir = o.baseDir
		}
		if mo.Logger == nil {
			mo.Logger = a.logger
		}
		wg.Go(func() {
			c, err := mcp.Open(context.Background(), cfg, mo)
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				probs = append(probs, err.Error())
				delete(sets, server)
				return
			}
			sets[server].client = c
			a.closers = append(a.closers, c.Close)
		})
	}
	wg.Wait()
	slices.Sort(probs)
	for _, server := range slices.Sorted(maps.Keys(sets)) {
		a.mcp = append(a.mcp, sets[server])
	}
	return sets, probs
}

// WithMCPOptions gives the clients of the agent's MCP servers what a
// spec cannot: an OAuth handler, an HTTP client, where ${env:NAME} reads
// from. fn is called once for each server the agent opens; the agent
// fills in BaseDir and Logger when fn leaves them empty.
func WithMCPOptions(fn func(server spec.MCPServer) mcp.Options) Option {
	return func(o *options) { o.mcp = fn }
}

// bindMCP binds the tools the tools entry i takes from its server.
func (a *Agent) bindMCP(i int, entry string, sets map[string]*mcpSet) []string {
	server, name, _ := spec.ParseMCPTool(entry)
	s := sets[server]
	if s == nil {
		return nil // it did not open: openMCP said why
	}
	s.seen.Store(s.client.Changes())
	tools, err := s.client.Tools(context.Background())
	if err != nil {
		return []string{fmt.Sprintf("tools[%d] %q: %v", i, entry, err)}
	}
	var probs []string
	found := false
	for _, t := range tools {
		if name != "*" && name != t.Remote() && name != t.Info().Name {
			continue
		}
		found = true
		if b := a.tools.byName[t.Info().Name]; b != nil && b.set == s {
			continue // taken by an earlier entry of the same server
		}
		if err := a.addBinding(&binding{tool: t, set: s}); err != nil {
			probs = append(probs, fmt.Sprintf("tools[%d] %q: %v (an mcp_servers prefix keeps them apart)", i, entry, err))
		}
	}
	if !found && name != "*" {
		have := make([]string, 0, len(tools))
		for _, t := range tools {
			have = append(have, t.Remote())
		}
		probs = append(probs, fmt.Sprintf("tools[%d] %q: server %s has no tool %q (it has: %s)", i, entry, server, name, strings.Join(have, ", ")))
	}
	return probs
}

// refreshTools offers the turn the agent's tools as its MCP servers now
// list them, when one said they changed. Calls find their tools in the
// agent's table as it is when they run.
func (r *run) refreshTools() {
	t := r.a.refreshMCP(r.ctx)
	if _, react := r.planner.(reactPlanner); !react {
		r.req.Tools = t.specs
	}
}

// refreshMCP lists again the tools of the servers that changed since they
// were bound and makes them the agent's table. A server that cannot list
// them keeps its last tools; a new tool whose name is taken is left out;
// both are logged.
func (a *Agent) refreshMCP(ctx context.Context) *toolTable {
	if !a.mcpChanged() {
		return a.table()
	}
	a.mcpMu.Lock()
	defer a.mcpMu.Unlock()
	if !a.mcpChanged() {
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
	for _, s := range a.mcp {
		seen := s.client.Changes()
		tools, err := s.client.Tools(ctx)
		if err != nil {
			a.logger.Warn("mcp tools not listed again; the last ones stay", "server", s.client.Name(), "error", err)
			for _, ts := range cur.specs {
				if b := cur.byName[ts.Name]; b.set == s {
					add(b)
				}
			}
			continue
		}
		for _, t := range tools {
			if !s.takes(t) {
				continue
			}
			b := cur.byName[t.Info().Name]
			if b == nil || b.set != s || b.tool.(*mcp.Tool).Remote() != t.Remote() || !sameInfo(b.info, t.Info()) {
				b = &binding{tool: t, set: s, info: t.Info(), label: "tool:" + t.Info().Name}
				b.handler, b.inner = a.toolChain(b.info)
			}
			if !add(b) {
				a.logger.Warn("mcp tool left out: its name is taken", "server", s.client.Name(), "tool", t.Remote(), "name", b.info.Name)
			}
		}
		s.seen.Store(seen)
	}
	a.live.Store(next)
	return next
}

func (a *Agent) mcpChanged() bool {
	for _, s := range a.mcp {
		if s.client.Changes() != s.seen.Load() {
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
