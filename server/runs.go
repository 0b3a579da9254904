package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	oteltrace "go.opentelemetry.io/otel/trace"

	"github.com/agentry/agentry/agent"
	evaluation "github.com/agentry/agentry/eval"
	"github.com/agentry/agentry/internal/strictjson"
	"github.com/agentry/agentry/internal/telemetry"
	"github.com/agentry/agentry/policy"
	"github.com/agentry/agentry/runlog"
	"github.com/agentry/agentry/spec"
	"github.com/agentry/agentry/store"
)

// runRequest is the body of POST /v1/runs.
type runRequest struct {
	Agent    string            `json:"agent,omitempty"`
	Pipeline string            `json:"pipeline,omitempty"`
	Model    string            `json:"model,omitempty"`
	Spec     json.RawMessage   `json:"spec,omitempty"`
	Input    map[string]any    `json:"input,omitempty"`
	User     string            `json:"user,omitempty"`
	Metadata map[string]string `json:"metadata,omitempty"`
}

// createRun starts a run of a named agent (or of an inline spec, for a
// caller the creation rules let), and answers 201 with its id at once, or 200 with its
// Result when ?wait=true. The run goes on whatever the client does.
func (s *Server) createRun(w http.ResponseWriter, r *http.Request) {
	if _, err := waits(r); err != nil {
		writeError(w, http.StatusBadRequest, "invalid_request", err.Error())
		return
	}
	var req runRequest
	if err := decodeBody(r, &req); err != nil {
		writeBodyError(w, err)
		return
	}
	c := callerOf(r.Context())
	if req.User != "" && c.user != "" && req.User != c.user {
		writeError(w, http.StatusForbidden, "forbidden", fmt.Sprintf("user %q: a key acts for its own name (%s)", req.User, c.user))
		return
	}
	// The run's owner: the key's user, or on a server without keys the
	// user the request names (the local operator's when none).
	p := c.principal()
	if p.UserID == "" {
		p.UserID = req.User
	}
	if req.Pipeline != "" {
		if req.Agent != "" || len(req.Spec) > 0 {
			writeError(w, http.StatusBadRequest, "invalid_request", `give one of "agent", "pipeline" and "spec"`)
			return
		}
		if req.Model != "" {
			writeError(w, http.StatusBadRequest, "invalid_request", `"model": a pipeline's stages keep their own models`)
			return
		}
		s.createPipelineRun(w, r, &req, p)
		return
	}
	a, owned, status, err := s.agentFor(&req, c)
	if err != nil {
		writeError(w, status, codeOf(status), err.Error())
		return
	}
	if s.cfg.Remote != nil {
		s.createRemote(w, r, &req, a, owned, p)
		return
	}
	sess, done, rf := s.start(r.Context(), &launch{agent: a, owned: owned, input: req.Input, user: req.User, metadata: req.Metadata,
		trace: traceOf(r)}, s.admitted, nil)
	if rf != nil {
		rf.write(w, writeError)
		return
	}
	s.answer(w, r, sess.RunID(), done, http.StatusCreated)
}

// waits reads ?wait=: true to answer with the Result, false (or none)
// to answer at once.
func waits(r *http.Request) (bool, error) {
	v := r.URL.Query().Get("wait")
	if v == "" {
		return false, nil
	}
	b, err := strconv.ParseBool(v)
	if err != nil {
		return false, fmt.Errorf("wait=%q: want true or false", v)
	}
	return b, nil
}

// traceContext is a caller's W3C trace context: its traceparent and
// tracestate headers.
type traceContext struct{ parent, state string }

// traceOf is the request's W3C trace context; none when its traceparent
// is missing or malformed (as the standard says, the run then starts a
// trace of its own rather than fail). A malformed tracestate is dropped,
// the traceparent kept.
func traceOf(r *http.Request) traceContext {
	tp := r.Header.Get("Traceparent")
	if _, ok := telemetry.Parse(tp, ""); !ok {
		return traceContext{}
	}
	ts := strings.Join(r.Header.Values("Tracestate"), ",") // W3C: several headers are one list
	if _, err := oteltrace.ParseTraceState(ts); err != nil {
		ts = ""
	}
	return traceContext{tp, ts}
}

// answer answers status with the id of the run going on, or 200 with its
// Result once done has it when the request says ?wait=true.
func (s *Server) answer(w http.ResponseWriter, r *http.Request, id string, done <-chan any, status int) {
	if wait, _ := waits(r); wait {
		select {
		case res := <-done:
			writeJSON(w, http.StatusOK, res)
		case <-r.Context().Done():
		}
		return
	}
	writeJSON(w, status, map[string]string{"run_id": id, "status": string(store.Running)})
}

// background runs sess in the slot taken for it, as p, in the server's
// context; the channel gets its Result.
func (s *Server) background(sess *agent.Session, a *agent.Agent, owned bool, p policy.Principal) <-chan any {
	id := sess.RunID()
	done := make(chan any, 1)
	s.drive(id, sess)
	ctx := policy.WithPrincipal(s.base, p)
	go func() {
		res, err := sess.Run(ctx)
		s.undrive(id)
		if owned {
			a.Close()
		}
		s.release()
		if errors.Is(err, store.ErrLeaseLost) {
			res = s.takenOver(id, res)
		}
		done <- res
	}()
	return done
}

// takeSlot takes a slot for a run, or answers 429 (503 once the server
// is stopping).
func (s *Server) takeSlot(w http.ResponseWriter) bool {
	if rf := s.admitted(); rf != nil {
		rf.write(w, writeError)
		return false
	}
	return true
}

// admitted takes a slot for a run, or says why not: 503 once the server
// is stopping, 429 when it is full.
func (s *Server) admitted() *refusal { return s.refusalOf(s.admit()) }

// refusalOf is the answer to a slot not taken.
func (s *Server) refusalOf(err error) *refusal {
	switch err {
	case errStopping:
		return &refusal{http.StatusServiceUnavailable, "stopping", "the server is shutting down; try another"}
	case errFull:
		return &refusal{http.StatusTooManyRequests, "too_many_runs", fmt.Sprintf("the server runs %d runs at once; try again", cap(s.slots))}
	}
	return nil
}

// refusal is why a request is refused: its status, code and message.
type refusal struct {
	status        int
	code, message string
}

func (rf *refusal) Error() string { return rf.message }

// write answers the refusal through fail (429 with Retry-After).
func (rf *refusal) write(w http.ResponseWriter, fail failFunc) {
	if rf.status == http.StatusTooManyRequests {
		w.Header().Set("Retry-After", "1")
	}
	fail(w, rf.status, rf.code, rf.message)
}

var (
	errStopping = errors.New("the server is stopping")
	errFull     = errors.New("the server runs all the runs it may")
)

// admit takes a slot for a run the server is about to start, and counts
// it for Close, unless the server is stopping (Close waits for the runs
// it counted: none may be counted after it began to wait) or full.
func (s *Server) admit() error { return s.take(&s.wg) }

// admittedRemote takes a slot for a run the Remote is about to start or
// go on with (given back by followRemote, or by the caller when the
// Remote refuses: releaseRemote), or says why not, as admitted does.
// Close waits for its follower, not for the run: it goes on elsewhere.
func (s *Server) admittedRemote() *refusal { return s.refusalOf(s.take(&s.remotes)) }

// releaseRemote gives back what admittedRemote took.
func (s *Server) releaseRemote() {
	<-s.slots
	s.remotes.Done()
}

// take takes a slot, counted in wg.
func (s *Server) take(wg *sync.WaitGroup) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.stopping {
		return errStopping
	}
	select {
	case s.slots <- struct{}{}:
		wg.Add(1)
		return nil
	default:
		return errFull
	}
}

// release gives back what admit took.
func (s *Server) release() {
	<-s.slots
	s.wg.Done()
}

// agentFor is the agent req names: a served one (built anew around the
// model the request names, when it names an allowed one: owned, the run
// closes it), or one built from its inline spec (owned), under the
// server's creation rules.
func (s *Server) agentFor(req *runRequest, c *caller) (a *agent.Agent, owned bool, status int, err error) {
	switch {
	case req.Agent != "" && len(req.Spec) > 0:
		return nil, false, http.StatusBadRequest, errors.New(`give "agent" or "spec", not both`)
	case req.Agent != "":
		a, err := s.cfg.Agents.Get(req.Agent)
		if err != nil {
			return nil, false, http.StatusNotFound, err
		}
		if req.Model == "" {
			return a, false, 0, nil
		}
		return s.servedWith(a, req.Model)
	case len(req.Spec) > 0:
		// The agent's name first: a caller who may not create it learns
		// nothing of how the server reads a spec.
		var named struct {
			AgentName string `json:"agent_name"`
		}
		json.Unmarshal(req.Spec, &named)
		if why := s.creation().Refused(c.creator(), []string{"agent:" + named.AgentName}); len(why) > 0 {
			return nil, false, http.StatusForbidden, fmt.Errorf("%w: %s", agent.ErrPolicyViolation, why[0])
		}
		sp, err := spec.Parse("spec", req.Spec)
		if err != nil {
			return nil, false, http.StatusBadRequest, err
		}
		if err := s.checkInlineModels(sp, req.Model); err != nil {
			return nil, false, http.StatusBadRequest, err
		}
		opts := append(slices.Clip(s.cfg.AgentOptions), s.createdBy(c))
		if req.Model != "" {
			opts = append(opts, agent.WithModel(req.Model))
		}
		a, err := agent.New(sp, opts...)
		if errors.Is(err, agent.ErrPolicyViolation) {
			return nil, false, http.StatusForbidden, err
		}
		if err != nil {
			return nil, false, http.StatusBadRequest, err
		}
		return a, true, 0, nil
	}
	return nil, false, http.StatusBadRequest, errors.New(`the body names no "agent" and has no "spec"`)
}

// runView is a run as the API shows it.
type runView struct {
	RunID    string `json:"run_id"`
	Kind     string `json:"kind"`
	Agent    string `json:"agent"`
	Version  string `json:"version"`
	ParentID string `json:"parent_run_id,omitempty"`
	// ParentKind is the parent's kind, when the caller reaches it: a
	// pipeline's stage, an agent's sub-agent, an evaluation's case.
	ParentKind string          `json:"parent_kind,omitempty"`
	SessionID  string          `json:"session_id,omitempty"`
	User       string          `json:"user,omitempty"` // the run's owner
	Status     store.Status    `json:"status"`
	Outcome    string          `json:"outcome,omitempty"`
	Turns      int             `json:"turns"`
	Tokens     int             `json:"tokens"`
	CostUSD    *float64        `json:"cost_usd"`
	Error      string          `json:"error,omitempty"`
	CreatedAt  time.Time       `json:"created_at"`
	UpdatedAt  time.Time       `json:"updated_at"`
	Result     json.RawMessage `json:"result,omitempty"`
}

func viewOf(r store.Run) runView {
	return runView{RunID: r.ID, Kind: r.Kind, Agent: r.Name, Version: r.Version, ParentID: r.ParentID, SessionID: r.SessionID,
		User: r.User, Status: r.Status, Outcome: r.Outcome, Turns: r.Turns, Tokens: r.Tokens, CostUSD: r.CostUSD, Error: r.Error,
		CreatedAt: r.CreatedAt, UpdatedAt: r.UpdatedAt}
}

// getRun answers a run's summary, with its Result once it has one.
func (s *Server) getRun(w http.ResponseWriter, r *http.Request) {
	run, ok := s.storedRun(w, r)
	if !ok {
		return
	}
	v := viewOf(run)
	// An evaluation's Result is its report, served by GET /v1/evals/{id}.
	if run.Status != store.Running && run.Kind != evaluation.Kind {
		if l, err := runlog.Read(r.Context(), s.cfg.Store, run.ID, s.logOptions()...); err == nil && l.Result != nil {
			v.Result = l.Result
		}
	}
	writeJSON(w, http.StatusOK, v)
}

// listRuns answers the runs, newest first: ?agent=, ?status=, ?since=
// and ?until= (RFC 3339), ?limit=, and ?cursor= (the next_cursor of the
// page before). Evaluations are not among them (GET /v1/evals lists
// them); their cases' runs are.
func (s *Server) listRuns(w http.ResponseWriter, r *http.Request) {
	f, err := filterOf(r)
	if err != nil {
		writeError(w, http.StatusBadRequest, "invalid_request", err.Error())
		return
	}
	if !s.ownedBy(r, &f) {
		writeJSON(w, http.StatusOK, map[string]any{"runs": []runView{}})
		return
	}
	f.NotKind = evaluation.Kind
	runs, err := s.cfg.Store.List(r.Context(), f)
	if err != nil {
		writeError(w, http.StatusInternalServerError, "store_error", "the run store failed to list runs")
		return
	}
	out := make([]runView, len(runs))
	kinds := s.parentKinds(r.Context(), runs)
	for i, run := range runs {
		out[i] = viewOf(run)
		out[i].ParentKind = kinds[run.ParentID]
	}
	page := map[string]any{"runs": out}
	if len(runs) == f.Limit {
		page["next_cursor"] = runs[len(runs)-1].ID
	}
	writeJSON(w, http.StatusOK, page)
}

// ownedBy scopes a listing to what the caller reaches: its own user's
// runs, or, for a caller that reaches every user's, anyone's (?user=
// picks one). false: the listing asks for another user's runs, or pages
// from a cursor that is another user's run, which the caller does not
// reach; it lists none, as for a user with none or a cursor that names
// no run.
func (s *Server) ownedBy(r *http.Request, f *store.Filter) bool {
	c := callerOf(r.Context())
	if c.all {
		return true
	}
	if f.User != "" && f.User != c.user {
		return false
	}
	f.User = c.user
	if f.Cursor != "" {
		if run, err := s.cfg.Store.Get(r.Context(), f.Cursor); err == nil && !c.sees(run.User) {
			return false
		}
	}
	return true
}

// filterOf reads a listing's query; each bad parameter is named.
func filterOf(r *http.Request) (store.Filter, error) {
	q := r.URL.Query()
	f := store.Filter{Name: q.Get("agent"), Status: store.Status(q.Get("status")), Cursor: q.Get("cursor"), Limit: 100,
		User: q.Get("user"), Conversation: q.Get("conversation")}
	if f.Status != "" && !f.Status.Valid() {
		return f, fmt.Errorf("status %q is not a run status", f.Status)
	}
	if l := q.Get("limit"); l != "" {
		n, err := strconv.Atoi(l)
		if err != nil || n < 1 || n > 1000 {
			return f, fmt.Errorf("limit %q is not a number from 1 to 1000", l)
		}
		f.Limit = n
	}
	for name, t := range map[string]*time.Time{"since": &f.Since, "until": &f.Until} {
		if v := q.Get(name); v != "" {
			at, err := time.Parse(time.RFC3339, v)
			if err != nil {
				return f, fmt.Errorf("%s %q is not an RFC 3339 time", name, v)
			}
			*t = at
		}
	}
	return f, nil
}

// logOptions read the server's run logs: opened with its key.
func (s *Server) logOptions() []runlog.Option {
	if s.seal == nil {
		return nil
	}
	return []runlog.Option{runlog.Sealed(s.seal)}
}

// drive and undrive keep the runs this server drives.
func (s *Server) drive(id string, st stopper) {
	s.mu.Lock()
	s.runs[id] = st
	s.mu.Unlock()
}

func (s *Server) undrive(id string) {
	s.mu.Lock()
	delete(s.runs, id)
	delete(s.relays, id)
	s.mu.Unlock()
}

// driving says whether this server drives the run.
func (s *Server) driving(id string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	_, ok := s.runs[id]
	_, started := s.started[id]
	return ok || started
}

// audit answers the run's records of the audit log, in order: every
// decision of its policy (allowed, denied, paused, approved), redacted
// as they were written.
func (s *Server) audit(w http.ResponseWriter, r *http.Request) {
	run, ok := s.storedRun(w, r)
	if !ok {
		return
	}
	recs, err := s.cfg.Store.AuditLog(r.Context(), run.ID)
	if err != nil {
		writeError(w, http.StatusInternalServerError, "store_error", "the run store failed to read the audit log")
		return
	}
	if recs == nil {
		recs = []store.AuditRecord{}
	}
	writeJSON(w, http.StatusOK, map[string]any{"records": recs})
}

// storedRun is the run the path names, when the caller reaches it, or
// the error answered: 404 for another user's run as for a missing one.
func (s *Server) storedRun(w http.ResponseWriter, r *http.Request) (store.Run, bool) {
	id := r.PathValue("id")
	run, err := s.cfg.Store.Get(r.Context(), id)
	// A run this server has just started may not be in the store yet:
	// the client that got its id must find it.
	// So may one another server started on the Remote, or this one
	// before it restarted: the Remote knows it, and is asked again now
	// and then.
	starting := func() bool { return s.cfg.Remote != nil && s.cfg.Remote.Starting(r.Context(), id) }
	waits := errors.Is(err, store.ErrNotFound) && (s.driving(id) || starting())
	for tick, n := time.NewTicker(pollEvery), 1; errors.Is(err, store.ErrNotFound) && waits; n++ {
		select {
		case <-r.Context().Done():
			tick.Stop()
			return run, false
		case <-tick.C:
		}
		if run, err = s.cfg.Store.Get(r.Context(), id); errors.Is(err, store.ErrNotFound) && n%20 == 0 {
			waits = s.driving(id) || starting()
		}
	}
	switch {
	case errors.Is(err, store.ErrNotFound), err == nil && !callerOf(r.Context()).sees(run.User):
		// Another user's run answers as one that does not exist.
		writeError(w, http.StatusNotFound, "not_found", fmt.Sprintf("no run %q", id))
		return store.Run{}, false
	case err != nil:
		writeError(w, http.StatusInternalServerError, "store_error", "the run store failed to read the run")
		return run, false
	}
	return run, true
}

// agentView is an agent as GET /v1/agents lists it.
type agentView struct {
	Name        string   `json:"name"`
	Version     string   `json:"version"`
	Mode        string   `json:"mode"`
	Model       string   `json:"model,omitempty"`
	Description string   `json:"description,omitempty"`
	Tools       []string `json:"tools"`
}

func (s *Server) listAgents(w http.ResponseWriter, r *http.Request) {
	out := []agentView{}
	for _, a := range s.cfg.Agents.Agents() {
		sp := a.Spec()
		out = append(out, agentView{Name: sp.AgentName, Version: sp.Version, Mode: string(sp.Mode), Model: sp.ModelName,
			Description: sp.Description, Tools: append([]string{}, sp.Tools...)})
	}
	writeJSON(w, http.StatusOK, map[string]any{"agents": out, "pipelines": s.pipelineViews()})
}

// decodeBody reads r's JSON body into v, refusing unknown fields.
func decodeBody(r *http.Request, v any) error {
	data, err := bodyOf(r)
	if err != nil {
		return err
	}
	return strictjson.Decode(data, v)
}

// bodyOf reads r's body, which must be JSON, and not empty.
func bodyOf(r *http.Request) ([]byte, error) {
	data, err := io.ReadAll(r.Body)
	if err != nil {
		return nil, err
	}
	if len(data) == 0 {
		return nil, errors.New("the body is empty: want a JSON object")
	}
	if mt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type")); err != nil || mt != "application/json" {
		// A form a web page posts cannot say application/json: a
		// cross-site write needs a preflight, which this server denies.
		return nil, errMediaType
	}
	return data, nil
}

// errMediaType is a body that does not say it is JSON.
var errMediaType = errors.New("the body must be JSON: send Content-Type: application/json")

// writeBodyError answers a body that could not be read: 413 past the
// cap, 415 for one not sent as JSON, 400 otherwise.
func writeBodyError(w http.ResponseWriter, err error) {
	if errors.Is(err, errMediaType) {
		writeError(w, http.StatusUnsupportedMediaType, "unsupported_media_type", err.Error())
		return
	}
	var tooBig *http.MaxBytesError
	if errors.As(err, &tooBig) {
		writeError(w, http.StatusRequestEntityTooLarge, "too_large", fmt.Sprintf("the body is over %d bytes", tooBig.Limit))
		return
	}
	writeError(w, http.StatusBadRequest, "invalid_request", err.Error())
}

// parentKinds are the kinds of the parents of runs that the caller
// reaches, by id: each parent read once.
func (s *Server) parentKinds(ctx context.Context, runs []store.Run) map[string]string {
	c := callerOf(ctx)
	out := map[string]string{}
	for _, run := range runs {
		if id := run.ParentID; id != "" {
			if _, done := out[id]; !done {
				out[id] = ""
				if p, err := s.cfg.Store.Get(ctx, id); err == nil && c.sees(p.User) {
					out[id] = p.Kind
				}
			}
		}
	}
	return out
}
