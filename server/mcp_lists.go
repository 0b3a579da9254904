package server

import (
	"context"
	"fmt"
	"slices"
	"sync"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/agentry/agentry/prompt"
)

// mcpLists is what the MCP server offers now: the served agents as tools
// and the prompt store's templates as prompts, each by the version
// offered, so that a change is offered again (and the SDK tells a
// client with a session that the list changed).
type mcpLists struct {
	mu      sync.Mutex
	tools   map[string]string // agent name → version offered
	prompts map[string]string // template id → version offered
}

// syncTools offers the latest version of each served agent, and no agent
// that is no longer served.
func (s *Server) syncTools() {
	l := &s.mcpLists
	l.mu.Lock()
	defer l.mu.Unlock()
	served := map[string]bool{}
	for _, a := range s.cfg.Agents.Agents() {
		name := a.Name()
		if served[name] {
			continue
		}
		served[name] = true
		latest, err := s.cfg.Agents.Get(name)
		if err != nil {
			continue
		}
		if v := latest.Spec().Version; l.tools[name] != v {
			s.mcp.AddTool(mcpTool(latest), s.mcpCall(name)) // replaces the version offered before
			l.tools[name] = v
		}
	}
	for name := range l.tools {
		if !served[name] {
			s.mcp.RemoveTools(name)
			delete(l.tools, name)
		}
	}
}

// syncPrompts offers the latest version of each template of the prompt
// store. A store that does not answer leaves the prompts as they were.
func (s *Server) syncPrompts(ctx context.Context) {
	if s.cfg.Prompts == nil {
		return
	}
	ts, err := s.cfg.Prompts.List(ctx, prompt.Filter{})
	if err != nil {
		if s.cfg.Logger != nil {
			s.cfg.Logger.Warn("mcp: the prompt store's templates are not listed", "error", err)
		}
		return
	}
	l := &s.mcpLists
	l.mu.Lock()
	defer l.mu.Unlock()
	listed := map[string]bool{}
	for _, t := range ts {
		listed[t.ID] = true
		if l.prompts[t.ID] == t.Version {
			continue
		}
		s.mcp.AddPrompt(mcpPrompt(&t), s.getPrompt(t.ID))
		l.prompts[t.ID] = t.Version
	}
	for id := range l.prompts {
		if !listed[id] {
			s.mcp.RemovePrompts(id)
			delete(l.prompts, id)
		}
	}
}

// mcpPrompt describes a template as an MCP prompt: its arguments are the
// template's variables, required as the template says.
func mcpPrompt(t *prompt.Template) *sdk.Prompt {
	vars, _ := t.Vars()
	p := &sdk.Prompt{Name: t.ID, Title: t.Name, Description: fmt.Sprintf("Prompt template %s@%s", t.ID, t.Version)}
	for _, v := range vars {
		p.Arguments = append(p.Arguments, &sdk.PromptArgument{Name: v, Required: slices.Contains(t.RequiredVars, v)})
	}
	return p
}

// getPrompt renders the latest version of template id, strictly: a
// missing required argument is an error naming it.
func (s *Server) getPrompt(id string) sdk.PromptHandler {
	return func(ctx context.Context, req *sdk.GetPromptRequest) (*sdk.GetPromptResult, error) {
		t, err := s.cfg.Prompts.Get(ctx, id, "")
		if err != nil {
			return nil, fmt.Errorf("prompt %s: %w", id, err)
		}
		params := make(map[string]any, len(req.Params.Arguments))
		for k, v := range req.Params.Arguments {
			params[k] = v
		}
		r, err := t.Render(params, true)
		if err != nil {
			return nil, fmt.Errorf("prompt %s: %w", id, err)
		}
		return &sdk.GetPromptResult{Description: fmt.Sprintf("Prompt template %s@%s", t.ID, t.Version),
			Messages: []*sdk.PromptMessage{{Role: "user", Content: &sdk.TextContent{Text: r.Text}}}}, nil
	}
}
