// The AG-UI endpoint: POST /ag-ui/{agent} runs a served
// agent for an agent front-end (CopilotKit, or any @ag-ui/client) and
// answers with the run as a stream of AG-UI events. The run is an
// ordinary stored run. An AG-UI thread is an agentry session; a run
// paused for approval ends its AG-UI run with an interrupt, which a
// second request on the same thread answers, resuming the same agentry
// run (docs/protocols.md#ag-ui).

package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"

	"github.com/agentry/agentry/agent"
	"github.com/agentry/agentry/event"
	"github.com/agentry/agentry/runlog"
	"github.com/agentry/agentry/store"
)

// aguiInput is what agentry reads of AG-UI's RunAgentInput. Its tools
// are the front-end's, offered to an agent whose spec takes a caller's
// tools; its context and forwardedProps are the front-end's too, and
// the agent's spec decides its prompt, so they are ignored.
type aguiInput struct {
	ThreadID string          `json:"threadId"`
	RunID    string          `json:"runId"`
	Messages []aguiMessage   `json:"messages"`
	Tools    []aguiTool      `json:"tools"`
	State    json.RawMessage `json:"state"`
	Resume   []aguiResume    `json:"resume"`
}

// aguiResume answers one interrupt of the run before (AG-UI's
// ResumeEntry).
type aguiResume struct {
	InterruptID string          `json:"interruptId"`
	Status      string          `json:"status"` // "resolved" or "cancelled"
	Payload     json.RawMessage `json:"payload"`
}

// maxThreadID bounds the ids a client names its thread and run with:
// the thread's is stored as the runs' session id.
const maxThreadID = 256

// maxConversationID bounds a conversation's id (agent.WithConversation):
// a longer thread's runs are in none.
const maxConversationID = 128

// check says what the input lacks: AG-UI requires threadId, runId and
// messages; a resume names each interrupt once, as resolved or
// cancelled.
func (in *aguiInput) check() error {
	switch {
	case in.ThreadID == "" || in.RunID == "":
		return errors.New(`the input needs "threadId" and "runId" (AG-UI's RunAgentInput)`)
	case len(in.ThreadID) > maxThreadID || len(in.RunID) > maxThreadID:
		return fmt.Errorf(`"threadId" and "runId" are at most %d bytes`, maxThreadID)
	}
	seen := map[string]bool{}
	for _, e := range in.Resume {
		switch {
		case e.InterruptID == "":
			return errors.New(`resume: an entry has no "interruptId"`)
		case e.Status != "resolved" && e.Status != "cancelled":
			return fmt.Errorf(`resume: interrupt %q: status %q is neither "resolved" nor "cancelled"`, e.InterruptID, e.Status)
		case seen[e.InterruptID]:
			return fmt.Errorf("resume: interrupt %q is answered twice", e.InterruptID)
		}
		seen[e.InterruptID] = true
	}
	return nil
}

// decision is what an answer decides: approve only when it is resolved
// with a payload whose "approved" is true; anything else (cancelled, no
// payload, "approved" false or not a boolean) denies, with the payload's
// "reason" if it gives one. Deny by default.
func (e aguiResume) decision() (approve bool, reason string) {
	var p struct {
		Approved json.RawMessage `json:"approved"`
		Reason   string          `json:"reason"`
	}
	if e.Status != "resolved" || json.Unmarshal(e.Payload, &p) != nil {
		return false, ""
	}
	return string(p.Approved) == "true", p.Reason
}

// agui runs the agent the path names for an AG-UI client: a new run on
// the last user message, or, when the input resumes interrupts, the
// paused run they belong to, with their decisions. It answers with the
// run's AG-UI events; the run goes on if the client goes away. Refusals
// before the stream begins are HTTP errors; after, RUN_ERROR events.
func (s *Server) agui(w http.ResponseWriter, r *http.Request) {
	var in aguiInput
	data, err := bodyOf(r)
	if err == nil {
		// Not strict: a RunAgentInput carries much agentry does not read.
		if err = json.Unmarshal(data, &in); err != nil {
			err = fmt.Errorf("the body is not an AG-UI RunAgentInput: %w", err)
		}
	}
	if err != nil {
		writeBodyError(w, err)
		return
	}
	if err := in.check(); err != nil {
		writeError(w, http.StatusBadRequest, "invalid_request", err.Error())
		return
	}
	name := r.PathValue("agent")
	a, err := s.cfg.Agents.Get(name)
	if err != nil {
		writeError(w, http.StatusNotFound, "not_found", fmt.Sprintf("agent %q: no such agent is served (GET /v1/agents lists them)", name))
		return
	}
	if !s.takeStream(w) {
		return
	}
	defer s.releaseStream()
	sp := a.Spec()
	cr := aguiCallers(&sp, &in)
	answers, err := in.answersOf()
	if err != nil {
		writeError(w, http.StatusBadRequest, "invalid_request", err.Error())
		return
	}
	st := newAGUIStream(&in, sp.AgentName+"@"+sp.Version, len(sp.Tools) == 0 && len(cr.tools) == 0)
	var done <-chan any
	switch {
	case len(in.Resume) > 0:
		done = s.aguiResume(w, r, name, &in, st)
	case answers != nil:
		done = s.aguiGoOn(w, r, a, &in, answers, st)
	default:
		done = s.aguiStart(w, r, a, &in, cr, st)
	}
	if done != nil {
		st.stream(r.Context(), w, done, s.heartbeat)
	}
}

// aguiStart starts a run of a on the input's last user message, in the
// session of the input's thread and in its conversation: the one agentry
// holds for the thread, which the run starts from, or, for a thread it
// does not hold yet, one made for it that starts from the input's
// earlier messages. Nil when it answered why not.
func (s *Server) aguiStart(w http.ResponseWriter, r *http.Request, a *agent.Agent, in *aguiInput, cr *callerRun, st *aguiStream) <-chan any {
	msgs := make([]chatMessage, len(in.Messages))
	for i, m := range in.Messages {
		msgs[i] = m.chat()
	}
	sp := a.Spec()
	history, input, err := chatTurn(a, &sp, msgs)
	if err != nil {
		writeError(w, http.StatusBadRequest, "invalid_request", err.Error())
		return nil
	}
	l := &launch{agent: a, input: input, session: in.ThreadID, trace: traceOf(r), history: history,
		metadata: map[string]string{"ag_ui_thread_id": in.ThreadID, "ag_ui_run_id": in.RunID}, listen: st.listener(),
		begun: func(id string) { st.agentRun = id }} // before the run starts: its sub-runs' events are not its own
	if perr := cr.arm(l); perr != nil {
		writeError(w, http.StatusBadRequest, "invalid_request", perr.Error())
		return nil
	}
	var done <-chan any
	var rf *refusal
	if s.joinSession(r.Context(), a, l) {
		_, done, rf = s.converse(r.Context(), l, "refuse")
	} else {
		_, done, rf = s.start(r.Context(), l, s.admitted, nil)
	}
	if rf != nil {
		rf.write(w, writeError)
		return nil
	}
	return done
}

// joinSession makes l's run one of the conversation of its protocol's
// session (an AG-UI thread, an A2A context), when the store keeps
// conversations: the caller's, which then holds the history (what the
// request carries of it is the client's copy), or one made for the
// session now, whose first run starts from the request's earlier
// messages. A session id that is another user's conversation runs as
// before, on the request alone, in none.
func (s *Server) joinSession(ctx context.Context, a *agent.Agent, l *launch) bool {
	cs, ok := s.cfg.Store.(store.Conversations)
	if !ok || len(l.session) > maxConversationID {
		return false
	}
	user := callerOf(ctx).user
	conv, err := cs.Conversation(ctx, l.session)
	if errors.Is(err, store.ErrNoConversation) {
		err = cs.CreateConversation(ctx, store.Conversation{ID: l.session, User: user, Agent: a.Name() + "@" + a.Spec().Version})
		if err == nil {
			l.conversation = l.session
			return true
		}
		conv, err = cs.Conversation(ctx, l.session) // made meanwhile
	}
	if err != nil || conv.User != user {
		return false
	}
	l.conversation, l.history = l.session, nil
	return true
}

// aguiResume resumes the paused run the input's interrupts belong to,
// with their decisions; nil when it answered why not. An interrupt's id
// is the waiting call's idempotency key (RUN:TURN:INDEX), so it names
// its run; the run must be of the input's thread and of the agent the
// path names, and the interrupts answered must be exactly the calls the
// store says are waiting, whatever the client echoes.
func (s *Server) aguiResume(w http.ResponseWriter, r *http.Request, name string, in *aguiInput, st *aguiStream) <-chan any {
	run, waiting, status, err := s.interrupted(r, name, in)
	if err != nil {
		writeError(w, status, codeOf(status), err.Error())
		return nil
	}
	var req resumeRequest
	for _, e := range in.Resume {
		if approve, reason := e.decision(); approve {
			req.Approve = append(req.Approve, e.InterruptID)
		} else {
			req.Deny = append(req.Deny, e.InterruptID)
			if req.Reason == "" {
				req.Reason = reason
			}
		}
		st.answered[waiting[e.InterruptID]] = true
	}
	sess, a, ok := s.resumeAgent(w, r, run, req, writeError, st.listener())
	if !ok {
		return nil
	}
	st.agentRun, st.replayTurn = sess.RunID(), -1
	// The run goes on for the user it acts for; the approver's roles
	// decide what it may do now.
	return s.background(sess, a, true, goesOnAs(r.Context()))
}

// interrupted is the paused run the input's resume answers, and its
// waiting calls (idempotency key to call id), or why the answer does not
// resume it, with the status to answer.
func (s *Server) interrupted(r *http.Request, name string, in *aguiInput) (store.Run, map[string]string, int, error) {
	ids := make([]string, len(in.Resume))
	for i, e := range in.Resume {
		ids[i] = e.InterruptID
	}
	runID, _, _ := strings.Cut(ids[0], ":")
	for _, id := range ids {
		if other, _, _ := strings.Cut(id, ":"); other != runID {
			return store.Run{}, nil, http.StatusBadRequest, fmt.Errorf("resume: interrupts %q and %q are of two runs: answer one run's", ids[0], id)
		}
	}
	run, err := s.cfg.Store.Get(r.Context(), runID)
	c := callerOf(r.Context())
	switch {
	case errors.Is(err, store.ErrNotFound), err == nil && !c.sees(run.User):
		// Another user's run answers as one that does not exist.
		return run, nil, http.StatusNotFound, fmt.Errorf("resume: interrupt %q names no run of this server", ids[0])
	case err != nil:
		return run, nil, http.StatusInternalServerError, errors.New("the run store failed to read the run")
	case !c.decides(run.User):
		return run, nil, http.StatusForbidden, fmt.Errorf("resume: run %s is %s's: only its own runner key or an admin answers its interrupts", run.ID, ownerName(run.User))
	case run.SessionID != in.ThreadID:
		return run, nil, http.StatusBadRequest, fmt.Errorf("resume: run %s is not of thread %q: answer its interrupts on its own thread", run.ID, in.ThreadID)
	case !sameAgent(name, run):
		return run, nil, http.StatusBadRequest, fmt.Errorf("resume: run %s is agent %s@%s's, not %s's", run.ID, run.Name, run.Version, name)
	case run.Status != store.AwaitingApproval:
		return run, nil, http.StatusConflict, fmt.Errorf("run %s is %s: it waits for no approval", run.ID, run.Status)
	}
	l, err := runlog.Read(r.Context(), s.cfg.Store, run.ID, s.logOptions()...)
	if err != nil {
		return run, nil, http.StatusInternalServerError, fmt.Errorf("run %s: its log does not read: %v", run.ID, err)
	}
	waiting := l.Waiting()
	var missing []string
	for key := range waiting {
		if !slices.Contains(ids, key) && l.Approvals[key].Rule != agent.RuleCaller { // a front-end's call is no interrupt
			missing = append(missing, key)
		}
	}
	for _, id := range ids {
		if _, ok := waiting[id]; !ok || l.Approvals[id].Rule == agent.RuleCaller {
			return run, nil, http.StatusBadRequest, fmt.Errorf("resume: interrupt %q does not wait in run %s (a call of the front-end's tool is answered with its tool message)", id, run.ID)
		}
	}
	if len(missing) > 0 {
		slices.Sort(missing)
		return run, nil, http.StatusBadRequest, fmt.Errorf("resume: answer every interrupt of run %s at once: %s unanswered", run.ID, strings.Join(missing, ", "))
	}
	return run, waiting, 0, nil
}

// sameAgent says whether the path's agent (NAME or NAME@VERSION) ran run.
func sameAgent(name string, run store.Run) bool {
	n, v, versioned := strings.Cut(name, "@")
	return n == run.Name && (!versioned || v == run.Version)
}

// takeStream takes a slot for an event stream, or answers 429.
func (s *Server) takeStream(w http.ResponseWriter) bool { return s.takeStreamWith(w, writeError) }

// takeStreamWith is takeStream with its refusal written by fail.
func (s *Server) takeStreamWith(w http.ResponseWriter, fail failFunc) bool {
	select {
	case s.streams <- struct{}{}:
		return true
	default:
		w.Header().Set("Retry-After", "1")
		fail(w, http.StatusTooManyRequests, "too_many_streams", fmt.Sprintf("the server streams %d runs' events at once; try again", cap(s.streams)))
		return false
	}
}

// releaseStream gives back what takeStream took.
func (s *Server) releaseStream() { <-s.streams }

// listener subscribes the stream to the events it maps to AG-UI's, on
// the run's goroutine (Inline: none is dropped; add never blocks).
func (st *aguiStream) listener() agent.RunOption {
	return agent.WithEvents(st.add, event.Inline(), event.Types(event.TurnStart, event.Thinking, event.ContentChunk,
		event.ToolCallStart, event.PolicyDecision, event.ToolCallEnd, event.TurnEnd))
}

// aguiMessage is one of AG-UI's messages.
type aguiMessage struct {
	ID         string          `json:"id"`
	Role       string          `json:"role"`
	Content    json.RawMessage `json:"content"`
	Name       string          `json:"name"`
	ToolCallID string          `json:"toolCallId"`
	ToolCalls  []chatToolCall  `json:"toolCalls"`
}

// chat is m as a chat message. A reasoning message is what the agent
// said before a call (agentry's thoughts reach AG-UI as such): its words
// are the assistant's.
func (m aguiMessage) chat() chatMessage {
	role := m.Role
	if role == "reasoning" {
		role = "assistant"
	}
	return chatMessage{Role: role, Content: m.Content, Name: m.Name, ToolCallID: m.ToolCallID, ToolCalls: m.ToolCalls}
}
