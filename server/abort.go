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
	"github.com/agentry/agentry/store"
)

// abort stops a run this server drives, or one another drives
// (abortElsewhere); 409 for one that ended.
func (s *Server) abort(w http.ResponseWriter, r *http.Request) {
	run, ok := s.storedRun(w, r)
	if !ok {
		return
	}
	if rf := s.abortRun(r.Context(), run); rf != nil {
		rf.write(w, writeError)
		return
	}
	writeJSON(w, http.StatusAccepted, map[string]string{"run_id": run.ID, "status": "aborting"})
}

// abortRun aborts run, for the caller of ctx: one this server drives, or one
// another drives (abortElsewhere); a refusal says why not.
func (s *Server) abortRun(ctx context.Context, run store.Run) *refusal {
	s.mu.Lock()
	sess := s.runs[run.ID]
	s.mu.Unlock()
	if sess == nil {
		return s.abortElsewhere(ctx, run)
	}
	if run.Status != store.Running {
		// Ended (or paused) in the store, though its goroutine may not
		// have let go of it yet.
		return &refusal{http.StatusConflict, "conflict", fmt.Sprintf("run %s is %s: it cannot be aborted", run.ID, run.Status)}
	}
	sess.Abort()
	return nil
}

// abortElsewhere aborts a run this server does not drive: through the
// Remote that drives it; or, for a run another agentry process drives
// (another server over the same store) or that waits (for approval, or
// for a resume), here: the other process's lease is broken, which stops
// it at its next write, and the run is resumed only to end aborted with
// what it did.
func (s *Server) abortElsewhere(ctx context.Context, run store.Run) *refusal {
	if driver := runlog.Driver(ctx, s.cfg.Store, run.ID, s.logOptions()...); driver != "" {
		if rf := s.remoteRefusal(run, driver); rf != nil {
			return rf
		}
		if ended(run.Status) {
			return &refusal{http.StatusConflict, "conflict", fmt.Sprintf("run %s is %s: it cannot be aborted", run.ID, run.Status)}
		}
		if err := s.cfg.Remote.Abort(ctx, run.ID); err != nil {
			return &refusal{http.StatusBadGateway, "remote_error", err.Error()}
		}
		return nil
	}
	switch {
	case run.ParentID != "":
		return &refusal{http.StatusConflict, "conflict", fmt.Sprintf("run %s is part of run %s: abort that one", run.ID, run.ParentID)}
	case run.Kind != "agent" || ended(run.Status):
		return &refusal{http.StatusConflict, "conflict", fmt.Sprintf("run %s is %s and not driven by this server: it cannot be aborted here", run.ID, run.Status)}
	case run.Status == store.Running && run.Holder != "":
		if err := s.cfg.Store.Break(ctx, run.ID, run.Holder); err != nil && !errors.Is(err, store.ErrLeaseLost) {
			return &refusal{http.StatusInternalServerError, "error", err.Error()}
		}
		var err error
		if run, err = s.cfg.Store.Get(ctx, run.ID); err != nil {
			return &refusal{http.StatusInternalServerError, "error", err.Error()}
		}
	}
	sess, a, rf := s.resumeRun(ctx, run, resumeRequest{}, s.admitted)
	if rf != nil {
		return rf
	}
	sess.Abort()
	p, err := s.startedFor(ctx, run.ID)
	if err != nil {
		p = *policy.PrincipalFrom(ctx)
	}
	s.background(sess, a, true, p)
	return nil
}

// takenOver is the Result of a run another process took from this one
// (an abort sent to another server broke its lease): the one the store
// records once that process ends or pauses it, so that this server
// answers what every other does. res, the session's own, if the store
// fails or the server closes first.
func (s *Server) takenOver(id string, res *agent.Result) *agent.Result {
	t := time.NewTicker(pollEvery)
	defer t.Stop()
	for {
		run, err := s.cfg.Store.Get(s.base, id)
		if err != nil {
			return res
		}
		if ended(run.Status) || run.Status == store.AwaitingApproval {
			l, err := runlog.Read(s.base, s.cfg.Store, id, s.logOptions()...)
			var stored agent.Result
			if err != nil || l.Result == nil || json.Unmarshal(l.Result, &stored) != nil {
				return res
			}
			return &stored
		}
		select {
		case <-s.closing:
			return res
		case <-t.C:
		}
	}
}

func ended(st store.Status) bool {
	return st == store.Completed || st == store.Failed || st == store.Aborted
}
