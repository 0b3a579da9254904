package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/agentry/agentry/agent"
	"github.com/agentry/agentry/policy"
	"github.com/agentry/agentry/runlog"
	"github.com/agentry/agentry/spec"
	"github.com/agentry/agentry/store"
)

// Remote runs a server's agents elsewhere: on the workers of a
// durable-execution engine (agentry worker, on Temporal). A server with
// a Remote starts each agent run there and follows it in the store, as
// any run; it decides and aborts the runs the Remote drives through it.
type Remote interface {
	// Start starts a run and returns its id.
	Start(ctx context.Context, r RemoteRun) (runID string, err error)
	// Decide approves or denies calls the run waits for.
	Decide(ctx context.Context, runID string, approve, deny []string, reason, by string) error
	// Abort stops the run: it ends aborted, on record.
	Abort(ctx context.Context, runID string) error
	// Drives reports whether the Remote drives the runs of driver, a
	// run's start record's (drive.Plan.Driver).
	Drives(driver string) bool
	// Wait returns once the run's workflow has ended (however it
	// ended: refused before the run began, terminated) or ctx is done.
	Wait(ctx context.Context, runID string) error
	// Starting reports whether the Remote has started a run of that id
	// that goes on and may not have begun (no worker took it yet): any
	// server over the store watches it from the moment it has its id.
	Starting(ctx context.Context, runID string) bool
}

// RemoteRun is a run a Remote starts: a served agent by name (the
// workers find it in their agents directory) or an inline spec.
type RemoteRun struct {
	Agent string
	// Conversation is the conversation the run is part of; "": none.
	Conversation string
	Spec         json.RawMessage
	Model        string
	Input        map[string]any
	UserID       string
	Roles        []string // the caller's: the policy's access rules read them
	// TraceParent and TraceState are the caller's W3C trace context.
	TraceParent, TraceState string
	Metadata                map[string]string
}

// createRemote starts a run of req's agent on the Remote: checked here
// (the agent, the caller's right to it, the input), run there, for p. It
// takes a run slot first: a run started on the Remote counts against
// MaxRuns until it ends or pauses, as a local one does.
func (s *Server) createRemote(w http.ResponseWriter, r *http.Request, req *runRequest, a *agent.Agent, owned bool, p policy.Principal) {
	if owned {
		defer a.Close()
	}
	if _, err := a.NewSession(req.Input, agent.WithMetadata(req.Metadata)); err != nil {
		writeError(w, http.StatusBadRequest, "invalid_input", err.Error())
		return
	}
	rr := RemoteRun{Model: req.Model, Input: req.Input, UserID: p.UserID, Roles: p.Roles, Metadata: req.Metadata}
	if tc := traceOf(r); tc.parent != "" {
		rr.TraceParent, rr.TraceState = tc.parent, tc.state
	}
	if len(req.Spec) > 0 {
		rr.Spec = req.Spec
	} else {
		rr.Agent = a.Name() + "@" + a.Spec().Version
	}
	id, rf := s.startRemote(r.Context(), rr)
	if rf != nil {
		rf.write(w, writeError)
		return
	}
	s.answerRemote(w, r, id, 0, http.StatusCreated)
}

// startRemote starts rr on the Remote in a slot, and returns its id once
// the run is in the store (or after remoteBegin, when no worker took it
// yet).
func (s *Server) startRemote(ctx context.Context, rr RemoteRun) (string, *refusal) {
	if rf := s.admittedRemote(); rf != nil {
		return "", rf
	}
	id, err := s.cfg.Remote.Start(ctx, rr)
	if err != nil {
		s.releaseRemote()
		return "", &refusal{http.StatusBadGateway, "remote_error", err.Error()}
	}
	// Until the run stops, a request for it waits for it to reach the
	// store: a client watches it from the moment it has its id.
	s.mu.Lock()
	if s.started == nil {
		s.started = map[string]string{}
	}
	s.started[id] = rr.Conversation
	s.mu.Unlock()
	s.begun(ctx, id, s.followRemote(id, 0))
	return id, nil
}

// followRemote holds the slot taken for a run the Remote drives until
// the run stops: its log has a Result after its record after (it ended,
// or paused for a person), the store reports it stopped (its worker
// died), or its workflow ended without one (the engine refused or
// terminated it before it began); or until the server closes.
func (s *Server) followRemote(id string, after int64) (ended <-chan struct{}) {
	end := make(chan struct{})
	ctx, cancel := context.WithCancel(s.base)
	go func() {
		s.cfg.Remote.Wait(ctx, id)
		close(end)
	}()
	go func() {
		defer s.releaseRemote()
		defer func() {
			s.mu.Lock()
			delete(s.started, id)
			s.mu.Unlock()
		}()
		defer func() { cancel(); <-end }()
		t := time.NewTicker(remoteFollow)
		defer t.Stop()
		for !s.remoteStopped(id, &after) {
			select {
			case <-s.base.Done():
				return
			case <-end:
				return
			case <-t.C:
			}
		}
	}()
	return end
}

// remoteStopped says whether the run has stopped since its record after
// (which it moves on to the last record read): a Result written, or,
// when nothing was, a status the store reports stopped.
func (s *Server) remoteStopped(id string, after *int64) bool {
	last := *after
	found, err := s.resultSince(s.base, id, after)
	if err != nil || *after == last {
		run, gerr := s.cfg.Store.Get(s.base, id)
		return gerr == nil && run.Status != store.Running && run.Status != store.AwaitingApproval
	}
	return found
}

// resultSince says whether the run's log has a Result after its record
// *after, and moves *after on to the last record read: each record is
// read once, however long the run.
func (s *Server) resultSince(ctx context.Context, id string, after *int64) (bool, error) {
	recs, err := s.cfg.Store.Records(ctx, id, *after)
	if err != nil || len(recs) == 0 {
		return false, err
	}
	*after = recs[len(recs)-1].Seq
	for _, rec := range recs {
		if rec.Kind == store.KindResult {
			return true, nil
		}
	}
	return false, nil
}

// remoteFollow is how often a run slot held for a run the Remote drives
// asks the store whether the run has stopped.
const remoteFollow = 200 * time.Millisecond

// remoteBegin is how long an answer waits for a worker to begin a run,
// so that the id it answers finds the run in the store.
var remoteBegin = 5 * time.Second // a variable for the tests of a run that begins later

// begun waits until the run is in the store, its workflow ended (it
// never will be), or remoteBegin passed (no worker took it yet: it
// starts when one does).
func (s *Server) begun(ctx context.Context, id string, ended <-chan struct{}) {
	ctx, cancel := context.WithTimeout(ctx, remoteBegin)
	defer cancel()
	t := time.NewTicker(remotePoll)
	defer t.Stop()
	for {
		if _, err := s.cfg.Store.Get(ctx, id); err == nil {
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-ended:
			return
		case <-t.C:
		}
	}
}

// answerRemote answers status with the id of a run the Remote drives,
// or, with ?wait=true, 200 with its Result once it ends or pauses after
// its log's record after.
func (s *Server) answerRemote(w http.ResponseWriter, r *http.Request, id string, after int64, status int) {
	if wait, _ := waits(r); !wait {
		writeJSON(w, status, map[string]string{"run_id": id, "status": string(store.Running)})
		return
	}
	res, err := s.settled(r.Context(), id, after)
	switch {
	case errors.Is(err, errStopping):
		writeError(w, http.StatusServiceUnavailable, "stopping", fmt.Sprintf("the server is shutting down; run %s goes on: follow it at /v1/runs/%s", id, id))
		return
	case err != nil:
		if r.Context().Err() == nil {
			writeError(w, http.StatusInternalServerError, "error", err.Error())
		}
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusOK)
	w.Write(res)
}

// remotePoll is how often a request that waits for a remote run asks the
// store about it.
const remotePoll = 50 * time.Millisecond

// settled waits until the run's log has a Result written after its
// record after (it ended, or paused for approval), and returns it;
// errStopping once the server stops.
func (s *Server) settled(ctx context.Context, id string, after int64) (json.RawMessage, error) {
	t := time.NewTicker(remotePoll)
	defer t.Stop()
	for {
		found, err := s.resultSince(ctx, id, &after)
		if err != nil && !errors.Is(err, store.ErrNotFound) {
			return nil, err
		}
		if found {
			l, err := runlog.Read(ctx, s.cfg.Store, id, s.logOptions()...)
			if err != nil {
				return nil, err
			}
			if l.Result != nil {
				return l.Result, nil
			}
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-s.closing: // the run goes on elsewhere: no reason to hold the server's stop
			return nil, errStopping
		case <-t.C:
		}
	}
}

// remoteRefusal says why a server cannot act on a run another driver
// drives, nil when its Remote drives it.
func (s *Server) remoteRefusal(run store.Run, driver string) *refusal {
	if s.cfg.Remote == nil || !s.cfg.Remote.Drives(driver) {
		return &refusal{http.StatusConflict, "conflict", fmt.Sprintf("run %s is driven by %s: this server cannot act on it (serve with that engine, or act there)", run.ID, driver)}
	}
	return nil
}

// resumeRemote gives the decisions of req to the run the Remote drives.
func (s *Server) resumeRemote(w http.ResponseWriter, r *http.Request, run store.Run, driver string, req resumeRequest) {
	if rf := s.remoteRefusal(run, driver); rf != nil {
		rf.write(w, writeError)
		return
	}
	if run.Status != store.AwaitingApproval {
		writeError(w, http.StatusConflict, "conflict", fmt.Sprintf("run %s is %s: it waits for no decision", run.ID, run.Status))
		return
	}
	l, err := runlog.Read(r.Context(), s.cfg.Store, run.ID, s.logOptions()...)
	if err != nil {
		writeError(w, http.StatusInternalServerError, "error", err.Error())
		return
	}
	if !s.servedRun(run, l.Start.Spec) {
		// An inline spec's run: deciding it is for who may create it.
		var sp spec.Spec
		if err := json.Unmarshal(l.Start.Spec, &sp); err != nil {
			writeError(w, http.StatusInternalServerError, "error", fmt.Sprintf("run %s: its spec: %v", run.ID, err))
			return
		}
		if why := s.mayCreate(callerOf(r.Context()), &sp); why != "" {
			writeError(w, http.StatusForbidden, "forbidden", fmt.Sprintf("run %s is of an inline spec the caller may not create: %s", run.ID, why))
			return
		}
	}
	if len(req.Approve)+len(req.Deny) == 0 {
		writeError(w, http.StatusBadRequest, "invalid_request", fmt.Sprintf("run %s is driven by %s and goes on there: name the calls to approve or deny", run.ID, driver))
		return
	}
	// Each name is checked against what the store says waits, as for a
	// local run, before the engine is told.
	waiting := l.Waiting()
	for _, id := range append(append([]string(nil), req.Approve...), req.Deny...) {
		if n := len(runlog.Named(waiting, id)); n != 1 {
			writeError(w, http.StatusBadRequest, "invalid_request", fmt.Sprintf("%q names %d of the calls run %s waits for", id, n, run.ID))
			return
		}
	}
	recs, err := s.cfg.Store.Records(r.Context(), run.ID, 0)
	if err != nil {
		writeError(w, http.StatusInternalServerError, "error", err.Error())
		return
	}
	by := policy.PrincipalFrom(r.Context()).UserID
	if by == "" {
		by = "anonymous"
	}
	if rf := s.admittedRemote(); rf != nil {
		rf.write(w, writeError)
		return
	}
	last := recs[len(recs)-1].Seq
	if err := s.cfg.Remote.Decide(r.Context(), run.ID, req.Approve, req.Deny, req.Reason, by); err != nil {
		s.releaseRemote()
		writeError(w, http.StatusBadGateway, "remote_error", err.Error())
		return
	}
	s.followRemote(run.ID, last)
	s.answerRemote(w, r, run.ID, last, http.StatusAccepted)
}
