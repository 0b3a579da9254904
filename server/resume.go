package server

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"

	"github.com/agentry/agentry/agent"
	"github.com/agentry/agentry/internal/journal"
	"github.com/agentry/agentry/policy"
	"github.com/agentry/agentry/runlog"
	"github.com/agentry/agentry/store"
)

// resumeRequest is the body of POST /v1/runs/{id}/resume.
type resumeRequest struct {
	Approve []string `json:"approve,omitempty"`
	Deny    []string `json:"deny,omitempty"`
	Reason  string   `json:"reason,omitempty"`
	Answer  string   `json:"answer,omitempty"`
}

// resume continues a run that awaits approval, or was interrupted: the
// calls it names are approved or denied, and each name is checked
// against what the run store says is waiting, never against anything the
// client sends back. The run goes on in the background (202), or to its
// end with ?wait=true.
func (s *Server) resume(w http.ResponseWriter, r *http.Request) {
	if _, err := waits(r); err != nil {
		writeError(w, http.StatusBadRequest, "invalid_request", err.Error())
		return
	}
	run, ok := s.storedRun(w, r)
	if !ok {
		return
	}
	if c := callerOf(r.Context()); !c.decides(run.User) {
		writeError(w, http.StatusForbidden, "forbidden", fmt.Sprintf("run %s is %s's: only its own runner key or an admin resumes it, approving or denying its calls", run.ID, ownerName(run.User)))
		return
	}
	var req resumeRequest
	if err := decodeBody(r, &req); err != nil {
		writeBodyError(w, err)
		return
	}
	switch {
	case req.Reason != "" && len(req.Deny) == 0:
		writeError(w, http.StatusBadRequest, "invalid_request", `"reason" says why calls are denied: name them in "deny"`)
		return
	case run.Kind == "pipeline":
		s.resumePipeline(w, r, run, req)
		return
	case req.Answer != "":
		writeError(w, http.StatusBadRequest, "invalid_request", `"answer" answers a pipeline's question: an agent's run takes "approve" and "deny"`)
		return
	}
	if driver := runlog.Driver(r.Context(), s.cfg.Store, run.ID, s.logOptions()...); driver != "" {
		s.resumeRemote(w, r, run, driver, req)
		return
	}
	sess, a, ok := s.resumeAgent(w, r, run, req, writeError)
	if !ok {
		return
	}
	s.answer(w, r, sess.RunID(), s.background(sess, a, true, goesOnAs(r.Context())), http.StatusAccepted)
}

// goesOnAs is the principal a resumed run goes on as: the user it acts
// for stays its own (its start record's), and the roles of the caller
// who resumed it decide what it may do now.
func goesOnAs(ctx context.Context) policy.Principal {
	return policy.Principal{Roles: []string{string(callerOf(ctx).role)}}
}

// ownerName is how an answer names a run's owner.
func ownerName(user string) string {
	if user == "" {
		return "the local operator"
	}
	return "user " + user
}

// failFunc writes an error answer in a route's shape (agentry's, or a
// protocol's).
type failFunc func(w http.ResponseWriter, status int, code, message string)

// resumeAgent resumes the stored agent run with the decisions of req, in
// a slot it takes for it, after checking that it resumes: an agent's
// run, awaiting approval or interrupted, of a served agent (an inline
// spec's only for an admin). more are further options of the resumed
// session. Refusals are answered by fail; ok false then. The caller runs
// the session, and closes the agent when it ends.
func (s *Server) resumeAgent(w http.ResponseWriter, r *http.Request, run store.Run, req resumeRequest, fail failFunc,
	more ...agent.RunOption) (sess *agent.Session, a *agent.Agent, ok bool) {
	sess, a, rf := s.resumeRun(r.Context(), run, req, s.admitted, more...)
	if rf != nil {
		rf.write(w, fail)
		return nil, nil, false
	}
	return sess, a, true
}

// resumeRun is resumeAgent's work for the caller of ctx, with the slot
// taken by slot (once the run is known to resume), and given back when
// the resume fails: the refusal says why.
func (s *Server) resumeRun(ctx context.Context, run store.Run, req resumeRequest, slot func() *refusal,
	more ...agent.RunOption) (*agent.Session, *agent.Agent, *refusal) {
	switch {
	case run.Kind != "agent":
		return nil, nil, &refusal{http.StatusConflict, "conflict", fmt.Sprintf("run %s is a %s's: it does not resume over HTTP", run.ID, run.Kind)}
	case !run.Status.Resumable():
		return nil, nil, &refusal{http.StatusConflict, "conflict", fmt.Sprintf("run %s is %s: only a run awaiting approval or interrupted resumes", run.ID, run.Status)}
	}
	build := s.cfg.AgentOptions
	l, err := runlog.Read(ctx, s.cfg.Store, run.ID, s.logOptions()...)
	if err != nil {
		return nil, nil, &refusal{http.StatusInternalServerError, "error", fmt.Sprintf("run %s: %v", run.ID, err)}
	}
	if !s.servedRun(run, l.Start.Spec) {
		// An inline spec's run, which the caller resumes only if it may
		// create what the spec brings.
		build = append(slices.Clip(build), s.createdBy(callerOf(ctx)))
	}
	a, err := agent.Stored(ctx, s.cfg.Store, run.ID, build...)
	if errors.Is(err, agent.ErrPolicyViolation) {
		return nil, nil, &refusal{http.StatusForbidden, "forbidden", fmt.Sprintf("run %s is of an inline spec the caller may not create: %v", run.ID, err)}
	}
	if err != nil {
		return nil, nil, &refusal{http.StatusInternalServerError, "error", fmt.Sprintf("run %s: its agent does not build: %v", run.ID, err)}
	}
	// The audit log names who decided: the key's name.
	approver := policy.PrincipalFrom(ctx).UserID
	if approver == "" {
		approver = "anonymous" // a server without keys
	}
	opts := append([]agent.RunOption{agent.DecidedBy(approver)}, more...)
	if len(req.Approve) > 0 {
		opts = append(opts, agent.Approve(req.Approve...))
	}
	if len(req.Deny) > 0 {
		opts = append(opts, agent.Deny(req.Deny...))
	}
	if req.Reason != "" {
		opts = append(opts, agent.WithDenyReason(req.Reason))
	}
	if rf := slot(); rf != nil {
		a.Close()
		return nil, nil, rf
	}
	sess, err := a.Resume(ctx, s.cfg.Store, run.ID, opts...)
	if err != nil {
		s.release()
		a.Close()
		if errors.Is(err, agent.ErrNotResumable) || errors.Is(err, store.ErrHeld) {
			return nil, nil, &refusal{http.StatusConflict, "conflict", err.Error()}
		}
		return nil, nil, &refusal{http.StatusBadRequest, "invalid_request", err.Error()}
	}
	return sess, a, nil
}

// startedFor is the principal a run started for, as its log says: a run
// resumed with no caller goes on with its roles and for its user.
func (s *Server) startedFor(ctx context.Context, runID string) (policy.Principal, error) {
	l, err := runlog.Read(ctx, s.cfg.Store, runID, s.logOptions()...)
	if err != nil {
		return policy.Principal{}, err
	}
	return policy.Principal{UserID: l.Start.UserID, Roles: l.Start.Roles}, nil
}

// ResumeInterrupted resumes, in the background, every stored agent run
// whose process stopped before it ended (a server interrupted at its
// Close, or one that crashed), and returns their ids. Each counts
// against MaxRuns; those past it stay interrupted, for a later call.
func (s *Server) ResumeInterrupted(ctx context.Context) ([]string, error) {
	runs, err := journal.Interrupted(ctx, s.cfg.Store)
	if err != nil {
		return nil, err
	}
	var ids []string
	var errs []error
	for _, run := range runs {
		if run.Kind != "agent" || run.ParentID != "" {
			continue // sub-runs and stages are their parents' to resume
		}
		if err := s.admit(); err != nil {
			if errors.Is(err, errFull) {
				err = nil // the rest stay interrupted, for a later call
			}
			return ids, errors.Join(append(errs, err)...)
		}
		a, err := agent.Stored(ctx, s.cfg.Store, run.ID, s.cfg.AgentOptions...)
		if err == nil {
			var sess *agent.Session
			var p policy.Principal
			if p, err = s.startedFor(ctx, run.ID); err == nil {
				sess, err = a.Resume(ctx, s.cfg.Store, run.ID)
			}
			if err == nil {
				s.background(sess, a, true, p)
				ids = append(ids, run.ID)
				continue
			}
			a.Close()
		}
		s.release()
		errs = append(errs, fmt.Errorf("run %s: %w", run.ID, err))
	}
	return ids, errors.Join(errs...)
}
