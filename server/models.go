package server

import (
	"errors"
	"fmt"
	"net/http"
	"slices"

	"github.com/agentry/agentry/agent"
	"github.com/agentry/agentry/spec"
)

// The models a request may name: a model is chosen by the operator, never
// by a caller. A request's "model" may name only the served agent's own
// model_name or one of its fallback_models, or a model the operator lists
// (Config.Models, agentry serve --models); an inline spec's models only
// those the operator lists, with no base_url of its own. So no request
// makes the server read a file (a "scripted:PATH" model) or call a host
// (a base_url) that the operator did not name.

// errModelRefused is the one answer to a model the server does not allow:
// the same whatever the value, so that it tells nothing of the files or
// providers it names.
var errModelRefused = errors.New(`"model": not a model this server allows (the agent's own model_name or fallback_models, or one the operator lists with --models)`)

// errSpecModelRefused is errModelRefused for an inline spec's models.
var errSpecModelRefused = errors.New(`an inline spec names a model this server does not allow: its model_name and fallback_models must be models the operator lists with --models, with no base_url`)

// servedWith is the served agent a for a request that names model: a
// itself for its own model_name; a new agent (owned by the run) for one
// of its fallbacks (which runs as its spec describes it: its provider
// and base_url) or one the operator lists; errModelRefused otherwise. A
// worker on Temporal builds the same agent from the same name.
func (s *Server) servedWith(a *agent.Agent, model string) (*agent.Agent, bool, int, error) {
	if a.UsesModel(model) {
		return a, false, 0, nil // its own model, by whatever name
	}
	sp := a.Spec()
	if !s.allowedFor(&sp, model) {
		return nil, false, http.StatusBadRequest, errModelRefused
	}
	b, err := agent.New(&sp, append(slices.Clip(s.cfg.AgentOptions), agent.WithModel(model))...)
	if err != nil {
		return nil, false, http.StatusBadRequest, fmt.Errorf("the agent does not build with the model it was asked for: %w", err)
	}
	return b, true, 0, nil
}

// allowedFor says whether a request may run agent sp with the model
// name: its own model_name, one of its fallback_models, or one of the
// operator's.
func (s *Server) allowedFor(sp *spec.Spec, name string) bool {
	if name == sp.ModelName {
		return true
	}
	for _, f := range sp.FallbackModels {
		if name == f.ModelName {
			return true
		}
	}
	return slices.Contains(s.cfg.Models, name)
}

// checkInlineModels refuses an inline spec whose models the operator did
// not list: its model_name and each fallback's, and any base_url.
func (s *Server) checkInlineModels(sp *spec.Spec, model string) error {
	refs := append([]spec.ModelRef{{ModelName: sp.ModelName, Provider: sp.Provider, BaseURL: sp.BaseURL}}, sp.FallbackModels...)
	for _, r := range refs {
		if r.BaseURL != "" || r.Provider != "" {
			return errSpecModelRefused
		}
		if r.ModelName != "" && !slices.Contains(s.cfg.Models, r.ModelName) {
			return errSpecModelRefused
		}
	}
	if model != "" && !slices.Contains(s.cfg.Models, model) {
		return errModelRefused
	}
	return nil
}
