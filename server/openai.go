// The OpenAI-compatible endpoint: POST
// /v1/chat/completions where "model" names a served agent, and GET
// /v1/models, so that the OpenAI SDKs and any OpenAI-compatible client
// call an agent. Each call is an ordinary stored run.

package server

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/agentry/agentry/agent"
	"github.com/agentry/agentry/event"
	"github.com/agentry/agentry/llm"
	"github.com/agentry/agentry/spec"
	"github.com/agentry/agentry/store"
)

// chatCompletions runs the agent "model" names on the last user message
// and answers as OpenAI's API does, streamed (server-sent chunks, then
// "data: [DONE]") or not. The run goes on if the client goes away.
func (s *Server) chatCompletions(w http.ResponseWriter, r *http.Request) {
	req, a, ok := openAIRequest(s, w, r, decodeChatRequest, func(req *chatRequest) string { return req.Model })
	if !ok {
		return
	}
	sp := a.Spec()
	cr, err := req.callers(&sp)
	if err == nil {
		err = req.check(&sp)
	}
	if err != nil {
		writeOpenAIParamError(w, err.(*paramError))
		return
	}
	var text *chunks
	if req.Stream {
		text = &chunks{ready: make(chan struct{}, 1)}
	}
	var runID string
	var done <-chan any
	var rf *refusal
	if cr.goesOn != "" {
		runID = cr.goesOn
		_, done, rf = s.goOn(r.Context(), a, cr, text.following(runID)...)
	} else if runID, done, rf, err = s.startCompletion(r, req, a, &sp, cr, text); err != nil {
		writeOpenAIParamError(w, err.(*paramError))
		return
	}
	if rf != nil {
		rf.write(w, writeOpenAIError)
		return
	}
	c := completion{id: "chatcmpl-" + runID, model: req.Model, created: time.Now().Unix()}
	w.Header().Set("X-Agentry-Run-Id", runID)
	if !req.Stream {
		select {
		case res := <-done:
			c.answer(w, res.(*agent.Result))
		case <-r.Context().Done():
		}
		return
	}
	c.usage = req.StreamOptions != nil && req.StreamOptions.IncludeUsage
	c.stream(r.Context(), w, text, done)
}

// startCompletion starts the run of a request that does not go on with
// one: on its last user message, after its history, offered the tools
// it brings (text, when streamed, listens).
func (s *Server) startCompletion(r *http.Request, req *chatRequest, a *agent.Agent, sp *spec.Spec, cr *callerRun, text *chunks) (string, <-chan any, *refusal, error) {
	history, input, err := chatTurn(a, sp, req.Messages)
	if err != nil {
		return "", nil, nil, err
	}
	run, owned, err := typed(a, sp, req.ResponseFormat)
	if err != nil {
		return "", nil, nil, err
	}
	l := &launch{agent: run, owned: owned, input: input, user: req.User, trace: traceOf(r), metadata: req.Metadata, history: history}
	if perr := cr.arm(l); perr != nil {
		if l.owned {
			l.agent.Close()
		}
		return "", nil, nil, perr
	}
	if text != nil {
		text.live = len(l.agent.Tools()) == 0
		l.listen = text.listen()[0]
		l.begun = func(id string) { text.runID = id } // before the run starts: its sub-runs' text is not its answer
	}
	runID, done, rf := s.startChat(r.Context(), l, history)
	return runID, done, rf, nil
}

// openAIRequest reads an OpenAI request's body with decode, and the
// served agent its model names; false when it answered why not, in
// OpenAI's shape (a field refused names it).
func openAIRequest[T any](s *Server, w http.ResponseWriter, r *http.Request, decode func([]byte) (T, error), model func(T) string) (T, *agent.Agent, bool) {
	data, err := bodyOf(r)
	var req T
	if err == nil {
		req, err = decode(data)
	}
	if err != nil {
		if pe, ok := errorsAsParam(err); ok {
			writeOpenAIParamError(w, pe)
			return req, nil, false
		}
		status := http.StatusBadRequest
		if errors.Is(err, errMediaType) {
			status = http.StatusUnsupportedMediaType
		}
		writeOpenAIError(w, status, "invalid_body", err.Error())
		return req, nil, false
	}
	a, err := s.cfg.Agents.Get(model(req))
	if err != nil {
		writeOpenAIError(w, http.StatusNotFound, "model_not_found", fmt.Sprintf("model %q: no such agent is served (GET /v1/models lists them)", model(req)))
		return req, nil, false
	}
	return req, a, true
}

// startChat starts a chat completion's run: with the request's history,
// or, when its metadata names a conversation of the caller's
// (conversation_id), in that conversation, which holds the history (the
// request then carries the new message only; a run of it going on is a
// 409).
func (s *Server) startChat(ctx context.Context, l *launch, history []llm.Message) (string, <-chan any, *refusal) {
	id := l.metadata["conversation_id"]
	if id != "" && l.owned {
		defer func() {
			if l.conversation == "" { // refused before it started: nothing else closes it
				l.agent.Close()
			}
		}()
	}
	if id == "" {
		sess, done, rf := s.start(ctx, l, s.admitted, nil)
		if rf != nil {
			return "", nil, rf
		}
		return sess.RunID(), done, nil
	}
	cs, ok := s.cfg.Store.(store.Conversations)
	switch {
	case !ok:
		return "", nil, &refusal{http.StatusNotImplemented, "not_implemented", fmt.Sprintf("metadata.conversation_id: the run store (%T) keeps no conversations", s.cfg.Store)}
	case len(history) > 0:
		return "", nil, &refusal{http.StatusBadRequest, "unsupported_parameter",
			"messages: conversation " + id + " holds what was said before: send the new user message only"}
	}
	conv, rf := s.speaker(ctx, cs, id)
	if rf != nil {
		return "", nil, rf
	}
	if l.user != "" && callerOf(ctx).user == "" && l.user != conv.User {
		return "", nil, &refusal{http.StatusBadRequest, "unsupported_parameter",
			fmt.Sprintf("user: conversation %s is %s's, and its runs are its user's", id, ownerName(conv.User))}
	}
	l.conversation, l.history = id, nil
	return s.converse(ctx, l, "refuse")
}

// chunks is the run's streamed text, kept for the handler: the run
// never waits for the client. The text of a turn that calls a tool is a
// thought, not the answer: an agent with tools has each turn's text held
// until the turn ends, then sent as the answer or as reasoning; an agent
// without tools has its text sent as it comes.
type chunks struct {
	runID string
	live  bool // no tools: every turn's text is the answer
	calls bool // each tool call is a piece too (its name)

	mu      sync.Mutex
	held    strings.Builder // the turn's text, until the turn ends
	thought bool            // the turn called a tool
	pieces  []piece
	ready   chan struct{} // a signal that pieces has more
}

// piece is streamed text: the answer's, or a thought's; or, when the
// chunks keep calls, the name of a tool called.
type piece struct {
	text      string
	reasoning bool
	tool      string
}

// following has c take the text of run runID, which goes on: the run
// options that listen to it; none for nil.
func (c *chunks) following(runID string) []agent.RunOption {
	if c == nil {
		return nil
	}
	c.runID = runID
	return c.listen()
}

// listen is the run option that has c take the run's text; none for nil.
func (c *chunks) listen() []agent.RunOption {
	if c == nil {
		return nil
	}
	return []agent.RunOption{agent.WithEvents(c.add, event.Inline(), event.Types(event.ContentChunk, event.ToolCallStart, event.TurnEnd))}
}

func (c *chunks) add(e event.Event) {
	if e.RunID != c.runID {
		return
	}
	c.mu.Lock()
	switch e.Type {
	case event.ContentChunk:
		if c.live {
			c.pieces = append(c.pieces, piece{text: e.Content})
		} else {
			c.held.WriteString(e.Content)
		}
	case event.ToolCallStart:
		c.thought = true
		if c.calls && e.Tool != nil {
			c.pieces = append(c.pieces, piece{tool: e.Tool.Name})
		}
	case event.TurnEnd:
		if c.held.Len() > 0 {
			c.pieces = append(c.pieces, piece{text: c.held.String(), reasoning: c.thought})
			c.held.Reset()
		}
		c.thought = false
	}
	c.mu.Unlock()
	select {
	case c.ready <- struct{}{}:
	default:
	}
}

func (c *chunks) take() []piece {
	c.mu.Lock()
	defer c.mu.Unlock()
	p := c.pieces
	c.pieces = nil
	return p
}

// models lists the served agents as OpenAI models: NAME@VERSION for each,
// and NAME for the version a bare name runs.
func (s *Server) models(w http.ResponseWriter, r *http.Request) {
	type model struct {
		ID      string `json:"id"`
		Object  string `json:"object"`
		Created int64  `json:"created"`
		OwnedBy string `json:"owned_by"`
	}
	out := []model{}
	seen := map[string]bool{}
	for _, a := range s.cfg.Agents.Agents() {
		sp := a.Spec()
		for _, id := range []string{sp.AgentName + "@" + sp.Version, sp.AgentName} {
			if !seen[id] {
				seen[id] = true
				out = append(out, model{ID: id, Object: "model", OwnedBy: "agentry"})
			}
		}
	}
	writeJSON(w, http.StatusOK, map[string]any{"object": "list", "data": out})
}

// writeOpenAIParamError refuses a request for one of its fields, naming
// it as OpenAI's errors do.
func writeOpenAIParamError(w http.ResponseWriter, e *paramError) {
	writeJSON(w, http.StatusBadRequest, map[string]any{"error": map[string]any{"message": e.Error(), "type": "invalid_request_error", "param": e.param, "code": e.code}})
}

// writeOpenAIError writes an error in OpenAI's shape:
// {"error": {"message", "type", "param", "code"}}.
func writeOpenAIError(w http.ResponseWriter, status int, code, message string) {
	writeJSON(w, status, map[string]any{"error": map[string]any{"message": message, "type": openAIType(status), "param": nil, "code": code}})
}

// openAIType is the error type OpenAI's API gives with status.
func openAIType(status int) string {
	switch {
	case status == http.StatusUnauthorized:
		return "authentication_error"
	case status == http.StatusForbidden:
		return "permission_error"
	case status == http.StatusTooManyRequests:
		return "rate_limit_error"
	case status >= 500:
		return "server_error"
	}
	return "invalid_request_error"
}
