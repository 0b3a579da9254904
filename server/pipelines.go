package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"sort"
	"strings"
	"sync"

	"github.com/agentry/agentry/agent"
	"github.com/agentry/agentry/event"
	"github.com/agentry/agentry/pipeline"
	"github.com/agentry/agentry/policy"
	"github.com/agentry/agentry/runlog"
	"github.com/agentry/agentry/store"
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
	sessOpts := sessionOptions(r.Context(), &launch{user: req.User, metadata: req.Metadata, trace: traceOf(r)})
	s.drivePipeline(w, r, p, http.StatusCreated, func(ctx context.Context, opts ...pipeline.RunOption) (*pipeline.Result, error) {
		return pl.Run(ctx, req.Input, append(opts, pipeline.WithSessionOptions(sessOpts...))...)
	})
}

// resumePipeline answers the question a stored pipeline run waits on
// (a stage's ask, or its confirm approved or denied), with the served
// pipeline of its name and version, and goes on as the same run.
func (s *Server) resumePipeline(w http.ResponseWriter, r *http.Request, run store.Run, req resumeRequest) {
	pl, err := s.pipelineFor(run.Name + "@" + run.Version)
	if err != nil {
		writeError(w, http.StatusConflict, "conflict", fmt.Sprintf("run %s: %v", run.ID, err))
		return
	}
	var env *pipeline.Envelope
	if l, err := runlog.Read(r.Context(), s.cfg.Store, run.ID, s.logOptions()...); err == nil && l.Result != nil {
		var res pipeline.Result
		if json.Unmarshal(l.Result, &res) == nil {
			env = res.Envelope
		}
	}
	if run.Status != store.AwaitingApproval || env == nil || env.Pending == nil {
		writeError(w, http.StatusConflict, "conflict", fmt.Sprintf("run %s is %s: a pipeline run resumes when it waits for an answer", run.ID, run.Status))
		return
	}
	answer, err := answerOf(req, env.Pending)
	if err != nil {
		writeError(w, http.StatusBadRequest, "invalid_request", fmt.Sprintf("run %s: %v", run.ID, err))
		return
	}
	if !s.takeSlot(w) {
		return
	}
	// The run goes on for its own user; the roles of the caller who
	// answered decide what its stages may do now.
	p := goesOnAs(r.Context())
	p.UserID = run.User
	s.drivePipeline(w, r, p, http.StatusAccepted, func(ctx context.Context, opts ...pipeline.RunOption) (*pipeline.Result, error) {
		return pl.Resume(ctx, env, answer, append(opts, pipeline.WithRunID(run.ID))...)
	})
}

// answerOf is what a resume request answers a pending question with:
// its answer, or, at a confirm, its stage approved or denied (as a call
// is). The stage is the one the store says waits, whatever the client
// names.
func answerOf(req resumeRequest, q *pipeline.Pending) (any, error) {
	ids := append(append([]string(nil), req.Approve...), req.Deny...)
	switch {
	case len(ids) == 0 && req.Answer == "":
		return nil, fmt.Errorf("it waits at stage %s (%s): give an \"answer\"", q.Stage, q.Outcome)
	case len(ids) > 0 && req.Answer != "":
		return nil, errors.New(`give "answer", or "approve"/"deny", not both`)
	case len(ids) == 0:
		return req.Answer, nil
	case q.Outcome != "confirm" || len(ids) != 1 || ids[0] != q.Stage:
		return nil, fmt.Errorf("it waits at stage %s (%s): approve or deny %q at a confirm, give an \"answer\" otherwise", q.Stage, q.Outcome, q.Stage)
	}
	return pipeline.Confirmation{Approved: len(req.Approve) == 1, Reason: req.Reason}, nil
}

// drivePipeline runs a pipeline in the slot the caller took, for p, in
// the server's context, and answers status with the run's id once it is
// in the store (or its Result with ?wait=true).
func (s *Server) drivePipeline(w http.ResponseWriter, r *http.Request, p policy.Principal, status int,
	run func(context.Context, ...pipeline.RunOption) (*pipeline.Result, error)) {
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
		res, err := run(ctx, pipeline.WithStore(s.cfg.Store), pipeline.WithEvents(first, event.Block()))
		if res == nil {
			errc <- err
			return
		}
		s.undrive(res.ID)
		done <- res
	}()
	select {
	case id := <-started:
		s.answer(w, r, id, done, status)
	case err := <-errc:
		writeError(w, http.StatusInternalServerError, "error", fmt.Sprintf("the pipeline did not start: %v", err))
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
