package server

import (
	"context"
	"fmt"
	"net/http"
	"sort"
	"strings"
	"sync"

	"github.com/agentry/agentry/agent"
	"github.com/agentry/agentry/event"
	"github.com/agentry/agentry/pipeline"
	"github.com/agentry/agentry/policy"
)

// pipelineRun is a pipeline run this server drives: stopping it is
// cancelling its context. A pipeline does not yet resume in another
// process, so an interrupted one ends as aborted.
type pipelineRun struct{ cancel context.CancelCauseFunc }

func (p pipelineRun) Abort()     { p.cancel(agent.ErrAborted) }
func (p pipelineRun) Interrupt() { p.cancel(agent.ErrAborted) }

// pipelineFor is the served pipeline ref names: "NAME" (one version
// served) or "NAME@VERSION".
func (s *Server) pipelineFor(ref string) (*pipeline.Pipeline, error) {
	name, version, pinned := strings.Cut(ref, "@")
	var found []*pipeline.Pipeline
	for _, p := range s.cfg.Pipelines {
		d := p.Definition()
		if d.PipelineName == name && (!pinned || d.Version == version) {
			found = append(found, p)
		}
	}
	switch len(found) {
	case 0:
		return nil, fmt.Errorf("no pipeline %q is served%s", ref, s.pipelineNames())
	case 1:
		return found[0], nil
	}
	return nil, fmt.Errorf("pipeline %q is served in %d versions: name one as NAME@VERSION", ref, len(found))
}

func (s *Server) pipelineNames() string {
	var names []string
	for _, p := range s.cfg.Pipelines {
		d := p.Definition()
		names = append(names, d.PipelineName+"@"+d.Version)
	}
	if len(names) == 0 {
		return " (none is)"
	}
	sort.Strings(names)
	return " (served: " + strings.Join(names, ", ") + ")"
}

// createPipelineRun starts a run of a served pipeline, as createRun does
// an agent's: in the background, in a slot, for the caller, stored.
func (s *Server) createPipelineRun(w http.ResponseWriter, r *http.Request, req *runRequest, p policy.Principal) {
	pl, err := s.pipelineFor(req.Pipeline)
	if err != nil {
		writeError(w, http.StatusNotFound, "not_found", err.Error())
		return
	}
	if !s.takeSlot(w) {
		return
	}
	sessOpts := []agent.RunOption{agent.WithMetadata(req.Metadata)}
	if req.User != "" {
		sessOpts = append(sessOpts, agent.WithUser(req.User))
	}
	if tp := traceParent(r); tp != "" {
		sessOpts = append(sessOpts, agent.WithTraceParent(tp))
	}
	ctx, cancel := context.WithCancelCause(policy.WithPrincipal(s.base, p))
	// The run's id comes with its first event, once it is in the store.
	started := make(chan string, 1)
	var once sync.Once
	first := func(e event.Event) {
		once.Do(func() {
			s.drive(e.RunID, pipelineRun{cancel}) // before the run can end and undrive it
			started <- e.RunID
		})
	}
	done := make(chan any, 1)
	errc := make(chan error, 1)
	go func() {
		defer s.release()
		defer cancel(nil)
		res, err := pl.Run(ctx, req.Input, pipeline.WithStore(s.cfg.Store), pipeline.WithSessionOptions(sessOpts...),
			pipeline.WithEvents(first, event.Block()))
		if res == nil {
			errc <- err
			return
		}
		s.undrive(res.ID)
		done <- res
	}()
	select {
	case id := <-started:
		s.answer(w, r, id, done, http.StatusCreated)
	case err := <-errc:
		writeError(w, http.StatusInternalServerError, "error", fmt.Sprintf("pipeline %s did not start: %v", req.Pipeline, err))
	}
}

// pipelineView is a pipeline as GET /v1/agents lists it.
type pipelineView struct {
	Name    string   `json:"name"`
	Version string   `json:"version"`
	Stages  []string `json:"stages"`
}

func (s *Server) pipelineViews() []pipelineView {
	out := []pipelineView{}
	for _, p := range s.cfg.Pipelines {
		d := p.Definition()
		v := pipelineView{Name: d.PipelineName, Version: d.Version, Stages: []string{}}
		for _, st := range d.Stages {
			v.Stages = append(v.Stages, st.Name)
		}
		out = append(out, v)
	}
	return out
}
