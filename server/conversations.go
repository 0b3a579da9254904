package server

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/agentry/agentry/agent"
	"github.com/agentry/agentry/event"
	"github.com/agentry/agentry/internal/ids"
	"github.com/agentry/agentry/runlog"
	"github.com/agentry/agentry/store"
)

// conversationView is a conversation as the API shows it.
type conversationView struct {
	ID         string    `json:"id"`
	User       string    `json:"user,omitempty"`
	Agent      string    `json:"agent,omitempty"`
	ForkedFrom string    `json:"forked_from,omitempty"`
	ForkedAt   string    `json:"forked_at,omitempty"`
	Runs       int       `json:"runs"`
	CreatedAt  time.Time `json:"created_at"`
	UpdatedAt  time.Time `json:"updated_at"`
	// Turns are its runs, oldest first, each with its message and its
	// answer (GET /v1/conversations/{id} only).
	Turns []turnView `json:"turns,omitempty"`
}

func conversationOf(c store.Conversation) conversationView {
	return conversationView{ID: c.ID, User: c.User, Agent: c.Agent, ForkedFrom: c.ForkedFrom, ForkedAt: c.ForkedAt, Runs: c.Runs,
		CreatedAt: c.CreatedAt, UpdatedAt: c.UpdatedAt}
}

// turnView is one run of a conversation, as a chat shows it: what was
// said, and what the agent answered.
type turnView struct {
	RunID     string       `json:"run_id"`
	Agent     string       `json:"agent"`
	Status    store.Status `json:"status"`
	CreatedAt time.Time    `json:"created_at"`
	runlog.Exchange
}

// conversations is the store's conversations, or the answer that it
// keeps none.
func (s *Server) conversations(w http.ResponseWriter) (store.Conversations, bool) {
	cs, ok := s.cfg.Store.(store.Conversations)
	if !ok {
		writeError(w, http.StatusNotImplemented, "not_implemented", fmt.Sprintf("the run store (%T) keeps no conversations", s.cfg.Store))
	}
	return cs, ok
}

// conversationOwned is the conversation of the request's path, when the
// caller reaches it: another user's answers as one that does not exist.
func (s *Server) conversationOwned(w http.ResponseWriter, r *http.Request, cs store.Conversations) (store.Conversation, bool) {
	id := r.PathValue("id")
	c, err := cs.Conversation(r.Context(), id)
	switch {
	case errors.Is(err, store.ErrNoConversation), err == nil && !callerOf(r.Context()).sees(c.User):
		writeError(w, http.StatusNotFound, "not_found", fmt.Sprintf("no conversation %q", id))
		return c, false
	case err != nil:
		writeError(w, http.StatusInternalServerError, "store_error", "the run store failed to read the conversation")
		return c, false
	}
	return c, true
}

// createConversation makes a conversation for the caller, its id the
// server's (so that no id tells whether another user's exists): 201
// with it.
func (s *Server) createConversation(w http.ResponseWriter, r *http.Request) {
	cs, ok := s.conversations(w)
	if !ok {
		return
	}
	var req struct {
		// Agent answers its messages unless one names another.
		Agent string `json:"agent,omitempty"`
	}
	if err := decodeBody(r, &req); err != nil {
		writeBodyError(w, err)
		return
	}
	c := store.Conversation{ID: ids.New("conv"), User: callerOf(r.Context()).user}
	if req.Agent != "" {
		a, err := s.cfg.Agents.Get(req.Agent)
		if err != nil {
			writeError(w, http.StatusNotFound, "not_found", err.Error())
			return
		}
		c.Agent = a.Name() + "@" + a.Spec().Version
	}
	if err := cs.CreateConversation(r.Context(), c); err != nil {
		writeError(w, http.StatusInternalServerError, "store_error", "the run store failed to create the conversation")
		return
	}
	c, err := cs.Conversation(r.Context(), c.ID)
	if err != nil {
		writeError(w, http.StatusInternalServerError, "store_error", "the run store failed to read the conversation")
		return
	}
	writeJSON(w, http.StatusCreated, conversationOf(c))
}

// listConversations lists the conversations the caller reaches, most
// recently updated first.
func (s *Server) listConversations(w http.ResponseWriter, r *http.Request) {
	cs, ok := s.conversations(w)
	if !ok {
		return
	}
	q := r.URL.Query()
	f := store.ConversationFilter{User: q.Get("user"), Cursor: q.Get("cursor"), Limit: 100}
	if l := q.Get("limit"); l != "" {
		n, err := strconv.Atoi(l)
		if err != nil || n < 1 || n > 1000 {
			writeError(w, http.StatusBadRequest, "invalid_request", fmt.Sprintf("limit %q is not a number from 1 to 1000", l))
			return
		}
		f.Limit = n
	}
	c := callerOf(r.Context())
	out := []conversationView{}
	if !c.all {
		if f.User != "" && f.User != c.user {
			writeJSON(w, http.StatusOK, map[string]any{"conversations": out})
			return
		}
		f.User = c.user
		if f.Cursor != "" {
			if cur, err := cs.Conversation(r.Context(), f.Cursor); err == nil && !c.sees(cur.User) {
				writeJSON(w, http.StatusOK, map[string]any{"conversations": out})
				return
			}
		}
	}
	list, err := cs.ListConversations(r.Context(), f)
	if err != nil {
		writeError(w, http.StatusInternalServerError, "store_error", "the run store failed to list conversations")
		return
	}
	for _, c := range list {
		out = append(out, conversationOf(c))
	}
	page := map[string]any{"conversations": out}
	if len(list) == f.Limit {
		page["next_cursor"] = list[len(list)-1].ID
	}
	writeJSON(w, http.StatusOK, page)
}

// maxTurnsShown is how many of its latest runs a conversation shows.
const maxTurnsShown = 200

// getConversation answers a conversation with its runs, oldest first,
// each with its message and answer.
func (s *Server) getConversation(w http.ResponseWriter, r *http.Request) {
	cs, ok := s.conversations(w)
	if !ok {
		return
	}
	c, ok := s.conversationOwned(w, r, cs)
	if !ok {
		return
	}
	runs, err := s.cfg.Store.List(r.Context(), store.Filter{Conversation: c.ID, Limit: maxTurnsShown})
	if err != nil {
		writeError(w, http.StatusInternalServerError, "store_error", "the run store failed to list the conversation's runs")
		return
	}
	slices.Reverse(runs)
	v := conversationOf(c)
	v.Turns = make([]turnView, 0, len(runs))
	for _, run := range runs {
		v.Turns = append(v.Turns, s.turnOf(r.Context(), run))
	}
	writeJSON(w, http.StatusOK, v)
}

// turnOf is a run of a conversation as a chat shows it.
func (s *Server) turnOf(ctx context.Context, run store.Run) turnView {
	t := turnView{RunID: run.ID, Agent: run.Name + "@" + run.Version, Status: run.Status, CreatedAt: run.CreatedAt}
	x, err := runlog.ReadExchange(ctx, s.cfg.Store, run.ID, s.logOptions()...)
	if err != nil {
		t.Error = "its log does not read: " + err.Error()
		return t
	}
	t.Exchange = x
	return t
}

// messageRequest is the body of POST /v1/conversations/{id}/messages.
type messageRequest struct {
	Message string `json:"message"`
	// Agent is the served agent that answers ("NAME" or "NAME@VERSION");
	// "": the conversation's last one, or the only agent served.
	Agent string `json:"agent,omitempty"`
	// IfBusy is what the message does while a run of the conversation
	// goes on: "refuse" (409, the default), "queue" (it runs after) or
	// "interrupt" (that run is aborted, then it runs).
	IfBusy   string            `json:"if_busy,omitempty"`
	Metadata map[string]string `json:"metadata,omitempty"`
}

// postMessage runs an agent on a message in one of the caller's
// conversations: 201 with the run's id once it is in the conversation,
// 200 with its Result with ?wait=true.
func (s *Server) postMessage(w http.ResponseWriter, r *http.Request) {
	cs, ok := s.conversations(w)
	if !ok {
		return
	}
	var req messageRequest
	if err := decodeBody(r, &req); err != nil {
		writeBodyError(w, err)
		return
	}
	if _, err := waits(r); err != nil {
		writeError(w, http.StatusBadRequest, "invalid_request", err.Error())
		return
	}
	switch req.IfBusy {
	case "", "refuse", "queue", "interrupt":
	default:
		writeError(w, http.StatusBadRequest, "invalid_request", fmt.Sprintf(`if_busy %q: want "refuse", "queue" or "interrupt"`, req.IfBusy))
		return
	}
	id := r.PathValue("id")
	conv, rf := s.speaker(r.Context(), cs, id)
	if rf != nil {
		rf.write(w, writeError)
		return
	}
	a, rf := s.answerer(req.Agent, conv)
	if rf != nil {
		rf.write(w, writeError)
		return
	}
	input, err := a.MessageInput(req.Message)
	if err != nil {
		writeError(w, http.StatusBadRequest, "invalid_input", err.Error())
		return
	}
	l := &launch{agent: a, input: input, metadata: req.Metadata, trace: traceOf(r), conversation: id}
	if s.cfg.Remote != nil {
		runID, rf := s.converseRemote(r.Context(), l, req.IfBusy)
		if rf != nil {
			rf.write(w, writeError)
			return
		}
		s.answerRemote(w, r, runID, 0, http.StatusCreated)
		return
	}
	runID, done, rf := s.converse(r.Context(), l, req.IfBusy)
	if rf != nil {
		rf.write(w, writeError)
		return
	}
	s.answer(w, r, runID, done, http.StatusCreated)
}

// speaker is the conversation id the caller speaks in: its own. Another
// user's is not found, or, for a caller who may see it, not the caller's
// to speak in.
func (s *Server) speaker(ctx context.Context, cs store.Conversations, id string) (store.Conversation, *refusal) {
	c := callerOf(ctx)
	conv, err := cs.Conversation(ctx, id)
	switch {
	case errors.Is(err, store.ErrNoConversation):
		return conv, &refusal{http.StatusNotFound, "not_found", fmt.Sprintf("no conversation %q", id)}
	case err != nil:
		return conv, &refusal{http.StatusInternalServerError, "store_error", "the run store failed to read the conversation"}
	case !c.sees(conv.User):
		return conv, &refusal{http.StatusNotFound, "not_found", fmt.Sprintf("no conversation %q", id)}
	case conv.User != c.user:
		return conv, &refusal{http.StatusForbidden, "forbidden", fmt.Sprintf("conversation %s is %s's: only its own user speaks in it", id, ownerName(conv.User))}
	}
	return conv, nil
}

// answerer is the served agent that answers a message: the one named,
// else the conversation's last one, else the only one served.
func (s *Server) answerer(ref string, conv store.Conversation) (*agent.Agent, *refusal) {
	if ref == "" {
		ref = conv.Agent
	}
	if ref == "" {
		all := s.cfg.Agents.Agents()
		if len(all) != 1 {
			return nil, &refusal{http.StatusBadRequest, "invalid_request", fmt.Sprintf(`name the "agent" that answers: %d agents are served`, len(all))}
		}
		return all[0], nil
	}
	a, err := s.cfg.Agents.Get(ref)
	if err != nil {
		return nil, &refusal{http.StatusNotFound, "not_found", err.Error()}
	}
	return a, nil
}

// converse starts l's run in its conversation: at once, or, when a run of
// the conversation goes on, as ifBusy says: refused (409), after it
// (queue), or after it was aborted (interrupt). It answers once the run
// is in the conversation, or ended before it could join it.
func (s *Server) converse(ctx context.Context, l *launch, ifBusy string) (string, <-chan any, *refusal) {
	return s.converseOn(ctx, l, ifBusy, s.admitted, nil)
}

// converseOn is converse with the slot and the track that start takes
// (a protocol's own: A2A's tasks): a run track refuses answers no
// channel.
func (s *Server) converseOn(ctx context.Context, l *launch, ifBusy string, slot func() *refusal, track func(*agent.Session) bool) (string, <-chan any, *refusal) {
	var at *place
	defer func() { at.leave() }()
	for {
		id, done, busy, rf := s.join(ctx, l, slot, track)
		if rf != nil || busy == "" {
			return id, done, rf
		}
		if rf := s.whileBusy(ctx, l.conversation, busy, ifBusy, &at); rf != nil {
			return "", nil, rf
		}
	}
}

// converseRemote is converse for a server whose runs go on the Remote:
// the store says which run holds the conversation before the run starts
// (two servers that race are told apart by the store, in the worker).
func (s *Server) converseRemote(ctx context.Context, l *launch, ifBusy string) (string, *refusal) {
	var at *place
	defer func() { at.leave() }()
	for {
		id, busy, rf := s.startInConversation(ctx, l)
		if rf != nil || busy == "" {
			return id, rf
		}
		if rf := s.whileBusy(ctx, l.conversation, busy, ifBusy, &at); rf != nil {
			return "", rf
		}
	}
}

// startInConversation starts l's run on the Remote when no run holds its
// conversation, or names the run that does. The messages of one
// conversation start one at a time on this server, so that two cannot
// both find it free before either run reaches the store.
func (s *Server) startInConversation(ctx context.Context, l *launch) (id, busy string, rf *refusal) {
	turn := s.lineUp("\x00start " + l.conversation)
	defer turn.leave()
	if err := turn.wait(ctx); err != nil {
		return "", "", &refusal{http.StatusServiceUnavailable, "stopping", err.Error()}
	}
	busy, err := s.holder(ctx, l.conversation)
	if err != nil {
		return "", "", &refusal{http.StatusInternalServerError, "store_error", "the run store failed to list the conversation's runs"}
	}
	if busy != "" {
		return "", busy, nil
	}
	p := callerOf(ctx).principal()
	rr := RemoteRun{Agent: l.agent.Name() + "@" + l.agent.Spec().Version, Conversation: l.conversation, Input: l.input,
		UserID: p.UserID, Roles: p.Roles, Metadata: l.metadata, TraceParent: l.trace.parent, TraceState: l.trace.state}
	id, rf = s.startRemote(ctx, rr)
	return id, "", rf
}

// holder is the run that holds the conversation (it goes on, waits for
// approval, or was interrupted), or "": a run this server started on the
// Remote that no worker has put in the store yet too.
func (s *Server) holder(ctx context.Context, conv string) (string, error) {
	if id := s.startedIn(conv); id != "" {
		run, err := s.cfg.Store.Get(ctx, id)
		if errors.Is(err, store.ErrNotFound) || err == nil && !ended(run.Status) {
			return id, nil
		}
	}
	for _, st := range []store.Status{store.Running, store.AwaitingApproval, store.Interrupted} {
		runs, err := s.cfg.Store.List(ctx, store.Filter{Conversation: conv, Status: st, Limit: 1})
		if err != nil || len(runs) > 0 {
			return firstID(runs), err
		}
	}
	return "", nil
}

// startedIn is a run of conversation conv this server started on the
// Remote and follows until it stops, or "".
func (s *Server) startedIn(conv string) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	for id, c := range s.started {
		if c == conv && conv != "" {
			return id
		}
	}
	return ""
}

func firstID(runs []store.Run) string {
	if len(runs) == 0 {
		return ""
	}
	return runs[0].ID
}

// whileBusy does what ifBusy says while the run busy holds conv: a
// refusal (refuse); or, the first time, a place at the end of the
// conversation's line on this server (*at), the run aborted (interrupt),
// and the wait for the messages ahead to go; then the wait for the run
// that holds it to end. Messages that wait thus run in the order they
// came.
func (s *Server) whileBusy(ctx context.Context, conv, busy, ifBusy string, at **place) *refusal {
	if ifBusy == "" || ifBusy == "refuse" {
		return &refusal{http.StatusConflict, "conversation_busy",
			fmt.Sprintf("run %s of conversation %s goes on: one run of a conversation goes at a time (if_busy: queue waits for it, interrupt aborts it)", busy, conv)}
	}
	if *at == nil {
		*at = s.lineUp(conv)
		if ifBusy == "interrupt" {
			if run, err := s.cfg.Store.Get(ctx, busy); err == nil {
				if rf := s.abortRun(ctx, run); rf != nil {
					// Refused: fine when it ended meanwhile; otherwise the
					// message says why it cannot interrupt, not waits.
					if now, err := s.cfg.Store.Get(ctx, busy); err != nil || !ended(now.Status) {
						return rf
					}
				}
			}
		}
		if err := (*at).wait(ctx); err != nil {
			return &refusal{http.StatusServiceUnavailable, "stopping", err.Error()}
		}
		return s.stillThere(ctx, conv) // the run that holds it now may be another
	}
	if err := s.awaitEnd(ctx, busy); err != nil {
		return &refusal{http.StatusServiceUnavailable, "stopping", err.Error()}
	}
	return s.stillThere(ctx, conv)
}

// stillThere refuses a message whose conversation was deleted while it
// waited: its run would make it again, empty.
func (s *Server) stillThere(ctx context.Context, conv string) *refusal {
	cs, _ := s.cfg.Store.(store.Conversations)
	if _, err := cs.Conversation(ctx, conv); errors.Is(err, store.ErrNoConversation) {
		return &refusal{http.StatusNotFound, "not_found", fmt.Sprintf("conversation %s was deleted while the message waited", conv)}
	}
	return nil
}

// join starts l's run (as start does, with slot and track) and waits until it is in its conversation (its
// run_start) or ended before: busy names the run that holds the
// conversation when that is why.
func (s *Server) join(ctx context.Context, l *launch, slot func() *refusal, track func(*agent.Session) bool) (id string, done <-chan any, busy string, rf *refusal) {
	started := make(chan struct{})
	var once sync.Once
	try := *l
	try.joined = agent.WithEvents(func(event.Event) { once.Do(func() { close(started) }) }, event.Types(event.RunStart))
	try.relay = &relay{} // a chat's answer streams as it is written
	sess, done, rf := s.start(ctx, &try, slot, track)
	if rf != nil {
		return "", nil, "", rf
	}
	if done == nil { // track refused it
		return sess.RunID(), nil, "", nil
	}
	select {
	case <-started:
		return sess.RunID(), done, "", nil
	case out := <-done:
		if res, ok := out.(*agent.Result); ok && res.Error != nil && res.Error.Code == agent.CodeConversationBusy {
			return "", nil, fmt.Sprint(res.Error.Details["run_id"]), nil
		}
		again := make(chan any, 1)
		again <- out
		return sess.RunID(), again, "", nil
	}
}

// awaitEnd waits until the run id no longer holds its conversation: it
// ended, or was deleted.
func (s *Server) awaitEnd(ctx context.Context, id string) error {
	t := time.NewTicker(pollEvery)
	defer t.Stop()
	for {
		run, err := s.cfg.Store.Get(ctx, id)
		if err != nil || ended(run.Status) {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-s.closing:
			return errClosing
		case <-t.C:
		}
	}
}

// forkConversation forks the conversation at one of its runs (the
// latest that ended by default): 201 with the fork, the caller's.
func (s *Server) forkConversation(w http.ResponseWriter, r *http.Request) {
	cs, ok := s.conversations(w)
	if !ok {
		return
	}
	var req struct {
		At string `json:"at,omitempty"`
	}
	if err := decodeBody(r, &req); err != nil {
		writeBodyError(w, err)
		return
	}
	conv, ok := s.conversationOwned(w, r, cs)
	if !ok {
		return
	}
	c := callerOf(r.Context())
	if !c.decides(conv.User) {
		writeError(w, http.StatusForbidden, "forbidden", fmt.Sprintf("conversation %s is %s's: only its own runner key or an admin forks it", conv.ID, ownerName(conv.User)))
		return
	}
	if req.At == "" {
		runs, _ := s.cfg.Store.List(r.Context(), store.Filter{Conversation: conv.ID, Limit: maxTurnsShown})
		for _, run := range runs {
			if ended(run.Status) {
				req.At = run.ID
				break
			}
		}
		if req.At == "" {
			writeError(w, http.StatusConflict, "conflict", fmt.Sprintf("conversation %s has no run that ended to fork at", conv.ID))
			return
		}
	}
	id := ids.New("conv")
	err := cs.Fork(r.Context(), conv.ID, req.At, store.Conversation{ID: id, User: c.user, Agent: conv.Agent})
	switch {
	case errors.Is(err, store.ErrNotFound):
		writeError(w, http.StatusNotFound, "not_found", err.Error())
		return
	case err != nil:
		writeError(w, http.StatusConflict, "conflict", err.Error())
		return
	}
	fork, err := cs.Conversation(r.Context(), id)
	if err != nil {
		writeError(w, http.StatusInternalServerError, "store_error", "the run store failed to read the fork")
		return
	}
	writeJSON(w, http.StatusCreated, conversationOf(fork))
}

// deleteConversation deletes a conversation with its runs and their
// logs, audited: its own user's runner, or an admin.
func (s *Server) deleteConversation(w http.ResponseWriter, r *http.Request) {
	cs, ok := s.conversations(w)
	if !ok {
		return
	}
	conv, ok := s.conversationOwned(w, r, cs)
	if !ok {
		return
	}
	c := callerOf(r.Context())
	if !c.decides(conv.User) {
		writeError(w, http.StatusForbidden, "forbidden", fmt.Sprintf("conversation %s is %s's: only its own runner key or an admin deletes it", conv.ID, ownerName(conv.User)))
		return
	}
	by := c.user
	if by == "" {
		by = "anonymous"
	}
	_, err := cs.DeleteConversation(r.Context(), conv.ID, by)
	var busy *store.BusyError
	switch {
	case errors.As(err, &busy):
		writeError(w, http.StatusConflict, "conversation_busy", fmt.Sprintf("run %s of conversation %s goes on: abort it first", busy.RunID, conv.ID))
		return
	case err != nil:
		writeError(w, http.StatusInternalServerError, "store_error", "the run store failed to delete the conversation")
		return
	}
	w.WriteHeader(http.StatusNoContent)
}
