// OpenAI's Responses API: POST /v1/responses runs the agent "model"
// names, and a response is a stored run (its id the run's), so GET
// /v1/responses/{id}, its cancel and its deletion are the run's. A stored
// response is a run of a conversation: previous_response_id continues
// the one its response is in (forking it at that response when the
// conversation went on since), conversation names one, and a response
// that names neither begins one.

package server

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"strings"
	"time"

	"github.com/agentry/agentry/agent"
	"github.com/agentry/agentry/internal/ids"
	"github.com/agentry/agentry/runlog"
	"github.com/agentry/agentry/spec"
	"github.com/agentry/agentry/store"
)

// createResponse runs the agent on the request's input and answers with
// the response: whole, streamed as OpenAI's events, or at once with
// background, to be read with GET.
func (s *Server) createResponse(w http.ResponseWriter, r *http.Request) {
	req, a, ok := openAIRequest(s, w, r, decodeResponseRequest, func(req *responseRequest) string { return req.Model })
	if !ok {
		return
	}
	sp := a.Spec()
	cr, err := req.callers(&sp)
	if err == nil {
		err = req.check(&sp)
	}
	if err == nil && cr.goesOn != "" && req.Store != nil && !*req.Store {
		err = refuseParam("store", "a response that goes on from calls it handed back is stored")
	}
	if err != nil {
		writeOpenAIParamError(w, err.(*paramError))
		return
	}
	o := &responseOut{model: req.Model, created: time.Now(), previous: req.PreviousResponseID, metadata: req.Metadata,
		stored: req.Store == nil || *req.Store, background: req.Background}
	if req.Instructions != nil {
		o.instructions = *req.Instructions
	}
	o.tools, o.toolChoice = req.Tools, req.ToolChoice
	if req.Text != nil && req.Text.Format != nil {
		o.format = req.Text.Format
	}
	var text *chunks
	if req.Stream {
		text = &chunks{ready: make(chan struct{}, 1)}
	}
	var done <-chan any
	var rf *refusal
	if cr.goesOn != "" {
		// The calls' results go on with the same response: one run.
		o.id = cr.goesOn
		if o.previous == o.id {
			o.previous = ""
		}
		var run store.Run
		run, done, rf = s.goOn(r.Context(), a, cr, text.following(o.id)...)
		o.conversation = run.Conversation
	} else if done, rf, err = s.startResponse(r, req, a, &sp, cr, text, o); err != nil {
		writeOpenAIParamError(w, err.(*paramError))
		return
	}
	if rf != nil {
		rf.write(w, writeOpenAIError)
		return
	}
	w.Header().Set("X-Agentry-Run-Id", o.id)
	switch {
	case req.Background:
		writeJSON(w, http.StatusOK, o.object(nil, "in_progress"))
	case req.Stream:
		o.stream(r.Context(), w, text, done)
	default:
		select {
		case res := <-done:
			writeJSON(w, http.StatusOK, o.object(res.(*agent.Result), ""))
		case <-r.Context().Done():
		}
	}
}

// startResponse starts the run of a request that does not go on with
// one: on its input's last user message, after its history, in the
// conversation it continues (stored) or kept nowhere, offered the tools
// it brings (text, when streamed, listens); o learns its id and
// conversation.
func (s *Server) startResponse(r *http.Request, req *responseRequest, a *agent.Agent, sp *spec.Spec, cr *callerRun, text *chunks, o *responseOut) (<-chan any, *refusal, error) {
	history, input, err := req.turn(a, sp)
	if err != nil {
		return nil, nil, err
	}
	run, owned, err := typed(a, sp, req.textFormat())
	if err != nil {
		return nil, nil, err
	}
	l := &launch{agent: run, owned: owned, input: input, user: cmp.Or(req.User, req.SafetyIdentifier), trace: traceOf(r), metadata: req.Metadata, history: history}
	if req.Instructions != nil {
		l.instructions = *req.Instructions // checked: the spec takes them
	}
	if perr := cr.arm(l); perr != nil {
		if l.owned {
			l.agent.Close()
		}
		return nil, nil, perr
	}
	if o.stored {
		if rf := s.responseConversation(r.Context(), req, a, l); rf != nil {
			if l.owned {
				l.agent.Close() // it never started
			}
			return nil, rf, nil
		}
	}
	if text != nil {
		text.live = len(l.agent.Tools()) == 0
		l.listen = text.listen()[0]
		l.begun = func(id string) { text.runID = id }
	}
	var done <-chan any
	var rf *refusal
	if o.stored {
		o.id, done, rf = s.converse(r.Context(), l, "refuse")
	} else {
		l.noStore = true
		var sess *agent.Session
		if sess, done, rf = s.start(r.Context(), l, s.admitted, nil); rf == nil {
			o.id = sess.RunID()
		}
	}
	o.conversation = l.conversation
	return done, rf, nil
}

// responseConversation puts l's run in the conversation the request
// continues: previous_response_id's (or a fork of it at that response,
// when the conversation went on since), conversation's, or, for neither,
// a new one the response begins, which starts from the request's input.
// A conversation that goes on holds what was said: the request then
// carries the new message only.
func (s *Server) responseConversation(ctx context.Context, req *responseRequest, a *agent.Agent, l *launch) *refusal {
	cs, ok := s.cfg.Store.(store.Conversations)
	if !ok {
		return &refusal{http.StatusNotImplemented, "not_implemented", fmt.Sprintf("the run store (%T) keeps no conversations: send store false", s.cfg.Store)}
	}
	user := callerOf(ctx).user
	id, err := req.conversationID()
	if err != nil {
		return &refusal{http.StatusBadRequest, "unsupported_parameter", err.Error()}
	}
	switch {
	case req.PreviousResponseID != "":
		if id, err = s.continuing(ctx, cs, req.PreviousResponseID); err != nil {
			var rf *refusal
			if errors.As(err, &rf) {
				return rf
			}
			return &refusal{http.StatusInternalServerError, "store_error", err.Error()}
		}
	case id != "":
		if _, rf := s.speaker(ctx, cs, id); rf != nil {
			return rf
		}
	default:
		id = ids.New("conv")
		if err := cs.CreateConversation(ctx, store.Conversation{ID: id, User: user, Agent: a.Name() + "@" + a.Spec().Version}); err != nil {
			return &refusal{http.StatusInternalServerError, "store_error", "the run store failed to make the response's conversation"}
		}
		l.conversation = id
		return nil
	}
	if len(l.history) > 0 {
		return &refusal{http.StatusBadRequest, "unsupported_parameter",
			"input: conversation " + id + " holds what was said before: send the new user message only"}
	}
	l.conversation = id
	return nil
}

// continuing is the conversation a response continues from response
// prev: prev's own, when prev is its latest run; else a fork of it at
// prev, the caller's.
func (s *Server) continuing(ctx context.Context, cs store.Conversations, prev string) (string, error) {
	run, err := s.cfg.Store.Get(ctx, prev)
	c := callerOf(ctx)
	switch {
	case errors.Is(err, store.ErrNotFound), err == nil && !c.sees(run.User):
		return "", &refusal{http.StatusNotFound, "not_found", fmt.Sprintf("previous_response_id: no response %q", prev)}
	case err != nil:
		return "", err
	case run.User != c.user:
		return "", &refusal{http.StatusForbidden, "forbidden", fmt.Sprintf("previous_response_id: response %s is %s's: only its own user goes on from it", prev, ownerName(run.User))}
	case run.Conversation == "":
		return "", &refusal{http.StatusBadRequest, "unsupported_parameter", fmt.Sprintf("previous_response_id: response %s is in no conversation (made with store false, or not a response)", prev)}
	}
	latest, err := s.cfg.Store.List(ctx, store.Filter{Conversation: run.Conversation, Limit: 1})
	if err != nil {
		return "", err
	}
	if len(latest) > 0 && latest[0].ID == prev {
		return run.Conversation, nil
	}
	fork := ids.New("conv")
	if err := cs.Fork(ctx, run.Conversation, prev, store.Conversation{ID: fork, User: c.user}); err != nil {
		return "", &refusal{http.StatusConflict, "conflict", fmt.Sprintf("previous_response_id: response %s: %v", prev, err)}
	}
	return fork, nil
}

// responseOut is what a response object says besides its run's Result.
type responseOut struct {
	id, model              string
	created                time.Time
	conversation, previous string
	instructions           string
	// What the request asked, answered back as it asked it.
	tools, toolChoice  json.RawMessage
	format             *textFormat
	metadata           map[string]string
	stored, background bool
	seq                int // the stream's next sequence number
}

// object is the response object of the run's Result (nil: it has none
// yet); status, when not "", says how it stands instead of the Result.
func (o *responseOut) object(res *agent.Result, status string) map[string]any {
	var errInfo, incomplete any
	var output []any
	usage := map[string]any{"input_tokens": 0, "output_tokens": 0, "total_tokens": 0,
		"input_tokens_details": map[string]any{"cached_tokens": 0}, "output_tokens_details": map[string]any{"reasoning_tokens": 0}}
	if res != nil {
		u := res.TokenUsage
		usage["input_tokens"], usage["output_tokens"], usage["total_tokens"] = u.PromptTokens, u.CompletionTokens, u.TotalTokens
		status, errInfo, incomplete = responseStatus(res)
		calls := handedBack(res)
		if text := answerText(res); text != "" || status == "completed" && len(calls) == 0 {
			output = append(output, o.message(text, "completed"))
		}
		for _, c := range calls {
			output = append(output, functionCall(c, "completed"))
		}
	}
	if output == nil {
		output = []any{}
	}
	meta := o.metadata
	if meta == nil {
		meta = map[string]string{}
	}
	obj := map[string]any{"id": o.id, "object": "response", "created_at": o.created.Unix(), "status": status,
		"model": o.model, "output": output, "usage": usage, "error": errInfo, "incomplete_details": incomplete,
		"instructions": nilIfEmpty(o.instructions), "metadata": meta, "parallel_tool_calls": true,
		"previous_response_id": nilIfEmpty(o.previous), "store": o.stored, "background": o.background,
		"text":        map[string]any{"format": map[string]any{"type": "text"}},
		"tool_choice": rawOr(o.toolChoice, "auto"), "tools": rawOr(o.tools, []any{}),
		"temperature": nil, "top_p": nil, "truncation": "disabled", "max_output_tokens": nil}
	if o.conversation != "" {
		obj["conversation"] = map[string]any{"id": o.conversation}
	}
	if o.format != nil {
		obj["text"] = map[string]any{"format": o.format}
	}
	return obj
}

// message is the response's output message of text.
func (o *responseOut) message(text, status string) map[string]any {
	content := []any{}
	if status == "completed" {
		content = append(content, outputText(text))
	}
	return map[string]any{"type": "message", "id": "msg_" + o.id, "status": status, "role": "assistant", "content": content}
}

// functionCall is a call handed back as an output item, its call id the
// call's key.
func functionCall(c agent.ApprovalError, status string) map[string]any {
	args := string(c.Arguments)
	if status != "completed" {
		args = ""
	}
	return map[string]any{"type": "function_call", "id": "fc_" + strings.ReplaceAll(c.Key, ":", "_"), "call_id": c.Key,
		"name": c.Tool, "arguments": args, "status": status}
}

func outputText(text string) map[string]any {
	return map[string]any{"type": "output_text", "text": text, "annotations": []any{}, "logprobs": []any{}}
}

// responseStatus is how a run's Result stands as a response: completed;
// incomplete (a budget, the turns or the time ran out, or a call waits
// for approval: its reason says which); failed, with the error; or
// cancelled.
func responseStatus(res *agent.Result) (status string, errInfo, incomplete any) {
	switch {
	case len(handedBack(res)) > 0:
		return "completed", nil, nil // its output is the calls it hands back
	case res.TerminateReason == agent.ReasonAwaitingApproval:
		return "incomplete", nil, map[string]any{"reason": "awaiting_approval"}
	case res.TerminateReason == agent.ReasonAborted:
		return "cancelled", nil, nil
	case res.Outcome == agent.OutcomePartial:
		return "incomplete", nil, map[string]any{"reason": "max_output_tokens"}
	case res.Error != nil && res.Outcome == agent.OutcomeError:
		return "failed", map[string]any{"code": res.Error.Code, "message": res.Error.Message}, nil
	}
	return "completed", nil, nil
}

// rawOr is raw as it is, or def when it is absent.
func rawOr(raw json.RawMessage, def any) any {
	if len(raw) == 0 || string(raw) == "null" {
		return def
	}
	return raw
}

func nilIfEmpty(s string) any {
	if s == "" {
		return nil
	}
	return s
}

// responseRun is the stored response of the path's id, for the caller,
// with its Result (nil while it runs).
func (s *Server) responseRun(w http.ResponseWriter, r *http.Request) (store.Run, *responseOut, *agent.Result, bool) {
	run, ok := s.storedResponse(w, r)
	if !ok {
		return run, nil, nil, false
	}
	l, err := runlog.Read(r.Context(), s.cfg.Store, run.ID, s.logOptions()...)
	var res *agent.Result
	if err == nil && l.Result != nil {
		res = new(agent.Result)
		err = json.Unmarshal(l.Result, res)
	}
	if err != nil {
		writeOpenAIError(w, http.StatusInternalServerError, "store_error", "the run store failed to read the response's run")
		return run, nil, nil, false
	}
	o := &responseOut{id: run.ID, model: run.Name, created: run.CreatedAt, conversation: run.Conversation,
		previous: l.Start.HistoryOf, instructions: l.Start.Instructions, metadata: l.Start.Metadata, stored: true}
	return run, o, res, true
}

// getResponse answers a stored response.
func (s *Server) getResponse(w http.ResponseWriter, r *http.Request) {
	run, o, res, ok := s.responseRun(w, r)
	if !ok {
		return
	}
	writeJSON(w, http.StatusOK, o.object(res, runningStatus(run)))
}

// runningStatus is a response's status while its run has no Result:
// in_progress; "" once it has one.
func runningStatus(run store.Run) string {
	if run.Status == store.Running {
		return "in_progress"
	}
	return ""
}

// cancelResponse aborts a response's run and answers the response once
// the run ended.
func (s *Server) cancelResponse(w http.ResponseWriter, r *http.Request) {
	run, o, res, ok := s.responseRun(w, r)
	if !ok {
		return
	}
	if run.Status == store.Running || run.Status == store.AwaitingApproval || run.Status == store.Interrupted {
		if rf := s.abortRun(r.Context(), run); rf != nil {
			rf.write(w, writeOpenAIError)
			return
		}
		if err := s.awaitEnd(r.Context(), run.ID); err != nil {
			writeOpenAIError(w, http.StatusServiceUnavailable, "stopping", err.Error())
			return
		}
		if res, _ = s.storedResult(r.Context(), run.ID); res == nil {
			res = &agent.Result{TerminateReason: agent.ReasonAborted}
		}
	}
	writeJSON(w, http.StatusOK, o.object(res, ""))
}

// deleteResponse deletes a stored response that is the only run of its
// conversation (as a response that began it and was not continued is),
// with its conversation; a response others went on from is a 409 naming
// the conversation to delete.
func (s *Server) deleteResponse(w http.ResponseWriter, r *http.Request) {
	run, ok := s.storedResponse(w, r)
	if !ok {
		return
	}
	cs, _ := s.cfg.Store.(store.Conversations)
	c := callerOf(r.Context())
	switch {
	case !c.decides(run.User):
		writeOpenAIError(w, http.StatusForbidden, "forbidden", fmt.Sprintf("response %s is %s's", run.ID, ownerName(run.User)))
		return
	case cs == nil || run.Conversation == "":
		writeOpenAIError(w, http.StatusConflict, "conflict", fmt.Sprintf("response %s is in no conversation: it is kept as a run", run.ID))
		return
	}
	conv, err := cs.Conversation(r.Context(), run.Conversation)
	if err != nil || conv.Runs != 1 {
		writeOpenAIError(w, http.StatusConflict, "conflict", fmt.Sprintf("response %s is one of %d runs of conversation %s: delete the conversation (DELETE /v1/conversations/%s)",
			run.ID, conv.Runs, run.Conversation, run.Conversation))
		return
	}
	var busy *store.BusyError
	if _, err := cs.DeleteConversation(r.Context(), conv.ID, c.user); errors.As(err, &busy) {
		writeOpenAIError(w, http.StatusConflict, "conversation_busy", fmt.Sprintf("response %s goes on: cancel it first", run.ID))
		return
	} else if err != nil {
		writeOpenAIError(w, http.StatusInternalServerError, "store_error", "the run store failed to delete the response")
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"id": run.ID, "object": "response.deleted", "deleted": true})
}

// stream writes the run as OpenAI's response events: created, in
// progress, the message and its text as the model writes it, then
// completed (or incomplete, or failed).
func (o *responseOut) stream(ctx context.Context, w http.ResponseWriter, text *chunks, done <-chan any) {
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
	rc := http.NewResponseController(w)
	send := func(typ string, fields map[string]any) bool {
		fields["type"], fields["sequence_number"] = typ, o.seq
		o.seq++
		b, _ := json.Marshal(fields)
		fmt.Fprintf(w, "event: %s\ndata: %s\n\n", typ, b)
		rc.SetWriteDeadline(time.Now().Add(writeTimeout))
		return rc.Flush() == nil
	}
	with := o.inMessage
	if !send("response.created", map[string]any{"response": o.object(nil, "in_progress")}) ||
		!send("response.in_progress", map[string]any{"response": o.object(nil, "in_progress")}) {
		return
	}
	// The message opens with its first text: a response whose output is
	// calls handed back has none, as its object has none.
	opened := false
	open := func() bool {
		if opened {
			return true
		}
		opened = true
		return send("response.output_item.added", map[string]any{"output_index": 0, "item": o.message("", "in_progress")}) &&
			send("response.content_part.added", with(map[string]any{"part": outputText("")}))
	}
	var sent string
	deltas := func(pieces []piece) bool {
		for _, p := range pieces {
			if p.reasoning || p.text == "" {
				continue // a thought is not the answer
			}
			sent += p.text
			if !open() || !send("response.output_text.delta", with(map[string]any{"delta": p.text, "logprobs": []any{}})) {
				return false
			}
		}
		return true
	}
	for {
		select {
		case <-ctx.Done():
			return // the run goes on
		case <-text.ready:
			if !deltas(text.take()) {
				return
			}
		case v := <-done:
			res := v.(*agent.Result)
			if !deltas(text.take()) {
				return
			}
			answer := answerText(res)
			if answer != "" || opened || len(handedBack(res)) == 0 {
				if rest, ok := strings.CutPrefix(answer, sent); ok && rest != "" {
					deltas([]piece{{text: rest}})
				}
				open()
				send("response.output_text.done", with(map[string]any{"text": answer, "logprobs": []any{}}))
				send("response.content_part.done", with(map[string]any{"part": outputText(answer)}))
				send("response.output_item.done", map[string]any{"output_index": 0, "item": o.message(answer, "completed")})
			}
			o.end(send, res, opened)
			return
		}
	}
}

// inMessage is an event's fields about the message's text: its item, and
// more.
func (o *responseOut) inMessage(more map[string]any) map[string]any {
	out := map[string]any{"item_id": "msg_" + o.id, "output_index": 0, "content_index": 0}
	maps.Copy(out, more)
	return out
}

// end streams the calls the run handed back (after the message, when
// one was sent), then the response as it ended: completed, failed or
// incomplete.
func (o *responseOut) end(send func(string, map[string]any) bool, res *agent.Result, message bool) {
	first := 0
	if message {
		first = 1
	}
	for i, c := range handedBack(res) {
		o.sendCall(send, first+i, c)
	}
	obj := o.object(res, "")
	switch obj["status"] {
	case "completed":
		send("response.completed", map[string]any{"response": obj})
	case "failed":
		send("response.failed", map[string]any{"response": obj})
	default:
		send("response.incomplete", map[string]any{"response": obj})
	}
}

// sendCall streams a call handed back as output item index: added, its
// arguments, done.
func (o *responseOut) sendCall(send func(string, map[string]any) bool, index int, c agent.ApprovalError) {
	id := functionCall(c, "")["id"]
	send("response.output_item.added", map[string]any{"output_index": index, "item": functionCall(c, "in_progress")})
	send("response.function_call_arguments.delta", map[string]any{"item_id": id, "output_index": index, "delta": string(c.Arguments)})
	send("response.function_call_arguments.done", map[string]any{"item_id": id, "output_index": index, "arguments": string(c.Arguments)})
	send("response.output_item.done", map[string]any{"output_index": index, "item": functionCall(c, "completed")})
}

// storedResult is the Result a stored run ended (or paused) with; nil
// while it has none.
func (s *Server) storedResult(ctx context.Context, id string) (*agent.Result, error) {
	l, err := runlog.Read(ctx, s.cfg.Store, id, s.logOptions()...)
	if err != nil || l.Result == nil {
		return nil, err
	}
	var res agent.Result
	if err := json.Unmarshal(l.Result, &res); err != nil {
		return nil, err
	}
	return &res, nil
}

// storedResponse is the stored run of the path's id, for a caller who
// sees it: another user's answers as a missing one, in OpenAI's shape.
func (s *Server) storedResponse(w http.ResponseWriter, r *http.Request) (store.Run, bool) {
	id := r.PathValue("id")
	run, err := s.cfg.Store.Get(r.Context(), id)
	switch {
	case errors.Is(err, store.ErrNotFound), err == nil && !callerOf(r.Context()).sees(run.User):
		writeOpenAIError(w, http.StatusNotFound, "not_found", fmt.Sprintf("no response %q", id))
		return run, false
	case err != nil:
		writeOpenAIError(w, http.StatusInternalServerError, "store_error", "the run store failed to read the response")
		return run, false
	}
	return run, true
}
