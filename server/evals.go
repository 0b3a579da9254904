package server

import (
	"errors"
	"fmt"
	"net/http"
	"time"

	evaluation "github.com/agentry/agentry/eval"
	"github.com/agentry/agentry/store"
)

// The evaluations as the API serves them: stored in the
// run store as runs of kind "eval", each case a child run, the report
// the evaluation's Result. They are listed here, not in GET /v1/runs;
// their case runs are ordinary runs, listed there.
//
// (The package is imported as evaluation: the package's tests have a
// helper of their own named eval.)

// evalView is an evaluation as GET /v1/evals lists it.
type evalView struct {
	ID        string       `json:"id"`
	Dataset   string       `json:"dataset"`
	Status    store.Status `json:"status"`
	Summary   string       `json:"summary,omitempty"` // "N/M passed", once it ended
	RescoreOf string       `json:"rescore_of,omitempty"`
	Trials    int          `json:"trials,omitempty"`
	// Agents are the agents evaluated, with their pass rates, once it
	// ended.
	Agents    []evalAgentView `json:"agents"`
	CreatedAt time.Time       `json:"created_at"`
	UpdatedAt time.Time       `json:"updated_at"`
}

// evalAgentView is an agent's line in the list of evaluations.
type evalAgentView struct {
	Agent    string  `json:"agent"`
	PassRate float64 `json:"pass_rate"`
	Passed   int     `json:"passed"`
	Total    int     `json:"total"`
}

// listEvals answers the stored evaluations, newest first: ?limit= and
// ?cursor=, as GET /v1/runs.
func (s *Server) listEvals(w http.ResponseWriter, r *http.Request) {
	f, err := pageOf(r)
	if err != nil {
		writeError(w, http.StatusBadRequest, "invalid_request", err.Error())
		return
	}
	if !s.ownedBy(r, &f) {
		writeJSON(w, http.StatusOK, map[string]any{"evals": []evalView{}})
		return
	}
	runs, err := evaluation.List(r.Context(), s.cfg.Store, f)
	if err != nil {
		writeError(w, http.StatusInternalServerError, "store_error", "the run store failed to list evaluations")
		return
	}
	out := make([]evalView, len(runs))
	for i, run := range runs {
		out[i] = evalView{ID: run.ID, Dataset: run.Name, Status: run.Status, Summary: run.Outcome, Agents: []evalAgentView{},
			CreatedAt: run.CreatedAt, UpdatedAt: run.UpdatedAt}
		if run.Status == store.Running || run.Status == store.Interrupted {
			continue // no report
		}
		// The agents and what a rescore scored again are in the report
		// alone: an evaluation's log is its start and its report.
		if rep, err := evaluation.Stored(r.Context(), s.cfg.Store, run.ID, s.logOptions()...); err == nil {
			out[i].RescoreOf, out[i].Trials = rep.RescoreOf, rep.Trials
			for _, a := range rep.Agents {
				out[i].Agents = append(out[i].Agents, evalAgentView{Agent: a.Agent, PassRate: a.PassRate, Passed: a.Passed, Total: a.Total})
			}
		}
	}
	page := map[string]any{"evals": out}
	if len(runs) == f.Limit {
		page["next_cursor"] = runs[len(runs)-1].ID
	}
	writeJSON(w, http.StatusOK, page)
}

// pageOf reads a listing's ?limit=, ?cursor= and ?user= alone.
func pageOf(r *http.Request) (store.Filter, error) {
	f, err := filterOf(r)
	return store.Filter{Cursor: f.Cursor, Limit: f.Limit, User: f.User}, err
}

// getEval answers an evaluation's report.
func (s *Server) getEval(w http.ResponseWriter, r *http.Request) {
	rep, ok := s.storedEval(w, r, r.PathValue("id"))
	if ok {
		writeJSON(w, http.StatusOK, rep)
	}
}

// compareEvals answers the report of the evaluation id with its
// baseline comparison against the evaluation baseline: ?agent= (default the
// first) of this one against ?baseline_agent= of the baseline (default
// the agent of the same name there, else its first), the deltas and the
// case trials that regressed or were fixed, as agentry eval --baseline
// finds them.
func (s *Server) compareEvals(w http.ResponseWriter, r *http.Request) {
	rep, ok := s.storedEval(w, r, r.PathValue("id"))
	if !ok {
		return
	}
	base, ok := s.storedEval(w, r, r.PathValue("baseline"))
	if !ok {
		return
	}
	q := r.URL.Query()
	to, err := agentOf(rep, q.Get("agent"), "")
	if err != nil {
		writeError(w, http.StatusBadRequest, "invalid_request", "agent: "+err.Error())
		return
	}
	from, err := agentOf(base, q.Get("baseline_agent"), to.Agent)
	if err != nil {
		writeError(w, http.StatusBadRequest, "invalid_request", "baseline_agent: "+err.Error())
		return
	}
	// In the report's baseline, as agentry eval --baseline stores it;
	// its comparison of its own two agents stays.
	rep.Baseline = evaluation.CompareAgents(from, to)
	rep.Baseline.Baseline = base.ID
	writeJSON(w, http.StatusOK, rep)
}

// agentOf is the agent of rep labelled name; without a name, the one
// labelled like (when there is one) or the first.
func agentOf(rep *evaluation.Report, name, like string) (*evaluation.AgentReport, error) {
	if len(rep.Agents) == 0 {
		return nil, fmt.Errorf("evaluation %s has no agent", rep.ID)
	}
	want := name
	if want == "" {
		want = like
	}
	for i := range rep.Agents {
		if rep.Agents[i].Agent == want {
			return &rep.Agents[i], nil
		}
	}
	if name != "" {
		return nil, fmt.Errorf("evaluation %s has no agent %q", rep.ID, name)
	}
	return &rep.Agents[0], nil
}

// storedEval is the report of the evaluation id, or the error answered:
// 404 for no run, another user's, or a run that is not an evaluation, 409 for one with no
// report (it goes on, or its process died).
func (s *Server) storedEval(w http.ResponseWriter, r *http.Request, id string) (*evaluation.Report, bool) {
	// Another user's evaluation answers as one that does not exist.
	if run, err := s.cfg.Store.Get(r.Context(), id); err == nil && !callerOf(r.Context()).sees(run.User) {
		writeError(w, http.StatusNotFound, "not_found", fmt.Sprintf("no evaluation %q", id))
		return nil, false
	}
	rep, err := evaluation.Stored(r.Context(), s.cfg.Store, id, s.logOptions()...)
	if err == nil {
		return rep, true
	}
	if errors.Is(err, store.ErrNotFound) || errors.Is(err, evaluation.ErrNotEvaluation) {
		writeError(w, http.StatusNotFound, "not_found", fmt.Sprintf("no evaluation %q", id))
		return nil, false
	}
	if run, gerr := s.cfg.Store.Get(r.Context(), id); gerr == nil && (run.Status == store.Running || run.Status == store.Interrupted) {
		writeError(w, http.StatusConflict, "conflict", fmt.Sprintf("evaluation %s is %s: it has no report", id, run.Status))
		return nil, false
	}
	writeError(w, http.StatusInternalServerError, "store_error", fmt.Sprintf("evaluation %s could not be read", id))
	return nil, false
}
