package server

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"

	"github.com/agentry/agentry/agent"
	"github.com/agentry/agentry/llm"
	"github.com/agentry/agentry/runlog"
	"github.com/agentry/agentry/spec"
	"github.com/agentry/agentry/store"
)

// aguiTool is one of a front-end's tools (AG-UI's Tool).
type aguiTool struct {
	Name        string          `json:"name"`
	Description string          `json:"description"`
	Parameters  json.RawMessage `json:"parameters"`
}

// aguiCallers is what the input asks of the front-end's tools: offered
// to an agent whose spec takes a caller's tools (the front-end runs each
// call handed back); the front-end's, not the agent's, for one whose spec
// does not, which is not offered them.
func aguiCallers(sp *spec.Spec, in *aguiInput) *callerRun {
	cr := &callerRun{}
	if !sp.TakesTools() {
		return cr
	}
	for _, t := range in.Tools {
		cr.tools = append(cr.tools, llm.ToolSpec{Name: t.Name, Description: t.Description, Parameters: t.Parameters})
	}
	return cr
}

// answersOf are the results the input ends with (its last messages, of
// role tool), by the call id each answers; nil when it ends with none.
func (in *aguiInput) answersOf() (map[string]string, error) {
	var out map[string]string
	for i := len(in.Messages) - 1; i >= 0 && in.Messages[i].Role == "tool"; i-- {
		m := in.Messages[i].chat()
		text, err := m.text(fmt.Sprintf("messages[%d]", i))
		if err != nil {
			return nil, err
		}
		if m.ToolCallID == "" {
			return nil, fmt.Errorf("messages[%d]: a tool message answers a call: name it (toolCallId)", i)
		}
		if out == nil {
			out = map[string]string{}
		}
		out[m.ToolCallID] = text
	}
	return out, nil
}

// aguiGoOn goes on with the thread's run that handed the front-end's
// calls back, with the results the input ends with: the latest run of
// the thread's conversation, which must wait for them. Nil when it
// answered why not.
func (s *Server) aguiGoOn(w http.ResponseWriter, r *http.Request, a *agent.Agent, in *aguiInput, answers map[string]string, st *aguiStream) <-chan any {
	runID, err := s.threadRun(r.Context(), in.ThreadID)
	if err != nil {
		writeError(w, http.StatusNotFound, "not_found", err.Error())
		return nil
	}
	if answers, err = s.waitedFor(r.Context(), runID, answers); err != nil {
		writeError(w, http.StatusBadRequest, "invalid_request", err.Error())
		return nil
	}
	st.agentRun, st.replayTurn = runID, -1 // before the run goes on: its events come at once
	_, done, rf := s.goOn(r.Context(), a, &callerRun{goesOn: runID, answers: answers}, st.listener())
	if rf != nil {
		rf.write(w, writeError)
		return nil
	}
	return done
}

// waitedFor keeps the answers to calls run waits for from its caller:
// the messages a front-end ends with answer its own tools' calls, and
// echo the results of the agent's own (AG-UI's TOOL_CALL_RESULT), which
// the run holds already.
func (s *Server) waitedFor(ctx context.Context, runID string, answers map[string]string) (map[string]string, error) {
	l, err := runlog.Read(ctx, s.cfg.Store, runID, s.logOptions()...)
	if err != nil {
		return nil, err
	}
	out := map[string]string{}
	for key, callID := range l.Waiting() {
		if text, ok := answers[callID]; ok && l.Approvals[key].Rule == agent.RuleCaller {
			out[callID] = text
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("the tool messages the input ends with answer no call run %s handed back: a run starts from a user's message", runID)
	}
	return out, nil
}

// threadRun is the latest run of the thread's conversation, the
// caller's: the one a front-end's tool results answer. Another user's
// thread answers as one without such a run.
func (s *Server) threadRun(ctx context.Context, thread string) (string, error) {
	none := fmt.Errorf("thread %s has no run of yours that handed calls back: a run starts from a user's message", thread)
	cs, ok := s.cfg.Store.(store.Conversations)
	if !ok {
		return "", none
	}
	conv, err := cs.Conversation(ctx, thread)
	if err != nil || conv.User != callerOf(ctx).user {
		return "", none
	}
	runs, err := s.cfg.Store.List(ctx, store.Filter{Conversation: thread, Limit: 1})
	if err != nil || len(runs) == 0 {
		return "", none
	}
	return runs[0].ID, nil
}
