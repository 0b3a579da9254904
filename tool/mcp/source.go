package mcp

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"

	"github.com/agentry/agentry/spec"
	"github.com/agentry/agentry/tool"
)

// Importing the package registers the source of "mcp:SERVER/TOOL" tools
// entries (and "mcp:SERVER/*"), with the default options.
func init() { tool.RegisterSource("mcp", Source(nil)) }

// Source is the source of "mcp:" tools entries whose clients take their
// options from fn (called once for each server an agent opens; nil: the
// defaults): what a spec cannot say, an OAuth handler, an HTTP client,
// where ${env:NAME} reads from. The agent's BaseDir and Logger fill in
// what fn leaves empty. An agent takes it with
// agent.WithSource("mcp", mcp.Source(fn)).
func Source(fn func(server spec.MCPServer) Options) tool.Source { return source{fn} }

type source struct{ opts func(spec.MCPServer) Options }

// Open opens, side by side, each MCP server the entries name, and checks
// that each entry's tool is one of its server's. A server that fails is
// an error naming it.
func (s source) Open(ctx context.Context, req tool.SourceRequest) ([]tool.Set, error) {
	var sp spec.Spec
	if err := json.Unmarshal(req.Spec, &sp); err != nil {
		return nil, fmt.Errorf("mcp: the spec: %w", err)
	}
	sets := map[string]*set{}
	for _, entry := range req.Entries {
		server, name, _ := spec.ParseMCPTool(entry)
		st := sets[server]
		if st == nil {
			st = &set{names: map[string]bool{}}
			sets[server] = st
		}
		if name == "*" {
			st.all = true
		} else {
			st.names[name] = true
		}
	}
	var wg sync.WaitGroup
	var mu sync.Mutex
	var errs []error
	for _, server := range slices.Sorted(maps.Keys(sets)) {
		cfg := sp.MCPServer(server)
		if cfg == nil {
			errs = append(errs, fmt.Errorf("mcp server %s: the spec's mcp_servers has no server of that name", server))
			delete(sets, server)
			continue
		}
		var o Options
		if s.opts != nil {
			o = s.opts(*cfg)
		}
		if o.BaseDir == "" {
			o.BaseDir = req.BaseDir
		}
		if o.Logger == nil {
			o.Logger = req.Logger
		}
		wg.Go(func() {
			c, err := Open(ctx, *cfg, o)
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				errs = append(errs, err)
				delete(sets, server)
				return
			}
			sets[server].c = c
		})
	}
	wg.Wait()
	slices.SortFunc(errs, func(a, b error) int { return strings.Compare(a.Error(), b.Error()) })
	out := make([]tool.Set, 0, len(sets))
	for _, server := range slices.Sorted(maps.Keys(sets)) {
		out = append(out, sets[server])
	}
	for i, entry := range req.Entries {
		if err := hasTool(ctx, sets, entry); err != nil {
			errs = append(errs, fmt.Errorf("tools[%d] %q: %w", req.Index[i], entry, err))
		}
	}
	return out, errors.Join(errs...)
}

// hasTool says why entry's tool is none of its server's, when it is not.
func hasTool(ctx context.Context, sets map[string]*set, entry string) error {
	server, name, _ := spec.ParseMCPTool(entry)
	st := sets[server]
	if st == nil || name == "*" {
		return nil // it did not open: said already
	}
	tools, err := st.c.Tools(ctx)
	if err != nil {
		return err
	}
	have := make([]string, 0, len(tools))
	for _, t := range tools {
		if name == t.Remote() || name == t.Info().Name {
			return nil
		}
		have = append(have, t.Remote())
	}
	return fmt.Errorf("server %s has no tool %q (it has: %s)", server, name, strings.Join(have, ", "))
}

// set is one MCP server an agent uses: its client (opened when the agent
// is built, shared by its runs, closed by the agent's Close) and which of
// its tools the spec takes.
type set struct {
	c     *Client
	all   bool            // mcp:SERVER/*
	names map[string]bool // mcp:SERVER/TOOL, by the server's name or the model's
}

func (s *set) Name() string    { return s.c.Name() }
func (s *set) Changes() uint64 { return s.c.Changes() }
func (s *set) Close() error    { return s.c.Close() }

// Tools are the server's tools the entries take, in the server's order.
func (s *set) Tools(ctx context.Context) ([]tool.Tool, error) {
	tools, err := s.c.Tools(ctx)
	if err != nil {
		return nil, err
	}
	out := make([]tool.Tool, 0, len(tools))
	for _, t := range tools {
		if s.all || s.names[t.Remote()] || s.names[t.Info().Name] {
			out = append(out, t)
		}
	}
	return out, nil
}
