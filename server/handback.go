// Tools a caller brings (OpenAI's tools), for an agent whose spec takes
// them (callers.tools): the run offers them to its model beside the
// agent's own, and hands each call of one back in the response
// (tool_calls, function_call items), its id the call's key,
// RUN_ID:TURN:INDEX. The run waits, stored; the next request's tool
// results (tool messages, function_call_output items) answering those
// ids go on with it.

package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"strings"

	"github.com/agentry/agentry/agent"
	"github.com/agentry/agentry/llm"
	"github.com/agentry/agentry/spec"
	"github.com/agentry/agentry/store"
)

// callerTools reads a request's tools: function tools, their function
// nested (chat completions) or flat (the Responses API). Another kind of
// tool is refused: agentry runs no tool of OpenAI's.
func callerTools(raw json.RawMessage, flat bool) ([]llm.ToolSpec, error) {
	var items []struct {
		Type     string `json:"type"`
		Function *struct {
			Name        string          `json:"name"`
			Description string          `json:"description"`
			Parameters  json.RawMessage `json:"parameters"`
			Strict      *bool           `json:"strict"`
		} `json:"function"`
		Name        string          `json:"name"`
		Description string          `json:"description"`
		Parameters  json.RawMessage `json:"parameters"`
		Strict      *bool           `json:"strict"`
	}
	if err := json.Unmarshal(raw, &items); err != nil {
		return nil, refuseParam("tools", "an array of tools")
	}
	out := make([]llm.ToolSpec, 0, len(items))
	for i, it := range items {
		param := fmt.Sprintf("tools[%d]", i)
		if it.Type != "function" {
			return nil, refuseParam(param+".type", "%q: a caller's tool here is a function, which the caller runs", it.Type)
		}
		t := llm.ToolSpec{Name: it.Name, Description: it.Description, Parameters: it.Parameters}
		if !flat {
			if it.Function == nil {
				return nil, refuseParam(param+".function", "a function tool needs its function")
			}
			t = llm.ToolSpec{Name: it.Function.Name, Description: it.Function.Description, Parameters: it.Function.Parameters}
		}
		if t.Name == "" {
			return nil, refuseParam(param, "a function needs its name")
		}
		out = append(out, t)
	}
	return out, nil
}

// toolChoice reads a request's tool_choice: "none", "auto", "required",
// or one function by name (nested in chat completions, flat in the
// Responses API).
func toolChoice(raw json.RawMessage, flat bool) (string, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return "", nil
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		switch s {
		case "none", "auto", "required":
			return s, nil
		}
		return "", refuseParam("tool_choice", "%q: want none, auto, required or a function", s)
	}
	var obj struct {
		Type     string `json:"type"`
		Name     string `json:"name"`
		Function struct {
			Name string `json:"name"`
		} `json:"function"`
	}
	if err := json.Unmarshal(raw, &obj); err != nil || obj.Type != "function" {
		return "", refuseParam("tool_choice", "a choice of one tool here names a function")
	}
	if !flat {
		obj.Name = obj.Function.Name
	}
	if obj.Name == "" {
		return "", refuseParam("tool_choice", "the function chosen needs its name")
	}
	return obj.Name, nil
}

// callerRun is what a request asks of its caller's tools: the tools, the
// choice (WithToolChoice), and, for a request that answers calls handed
// back, the run that goes on and the answers, by key.
type callerRun struct {
	tools   []llm.ToolSpec
	choice  string
	goesOn  string
	answers map[string]string
}

// newCallerRun reads a request's tools and tool_choice (their function
// nested, or flat): none unless the agent's spec takes a caller's tools
// (callers.tools), and no choice but auto either.
func newCallerRun(sp *spec.Spec, tools, choice json.RawMessage, flat bool) (*callerRun, error) {
	cr := &callerRun{}
	var err error
	if cr.choice, err = toolChoice(choice, flat); err != nil {
		return nil, err
	}
	given := len(tools) > 0 && string(tools) != "null" && string(tools) != "[]"
	switch {
	case given && !sp.TakesTools():
		return nil, refuseParam("tools", "the agent's tools are its spec's: its spec takes no tools from a client (callers.tools)")
	case cr.choice != "" && cr.choice != "auto" && !sp.TakesTools():
		return nil, refuseParam("tool_choice", "%q: a run of this agent chooses its own tools: its spec takes none from a client (callers.tools)", cr.choice)
	case given:
		if cr.tools, err = callerTools(tools, flat); err != nil {
			return nil, err
		}
	}
	return cr, nil
}

// arm makes l's run offer the caller's tools, forced as the choice says:
// its agent is l's with them (closed with the run).
func (cr *callerRun) arm(l *launch) *paramError {
	if len(cr.tools) > 0 {
		a, err := l.agent.WithCallerTools(cr.tools...)
		if err != nil {
			return refuseParam("tools", "%v", strings.TrimPrefix(err.Error(), agent.ErrConfig.Error()+": "))
		}
		if l.owned {
			l.agent.Close()
		}
		l.agent, l.owned = a, true
	}
	switch cr.choice {
	case "", "auto":
		return nil
	case "none", "required":
	default:
		// A caller names one of its own tools: the agent's own are the
		// agent's to call, never a caller's to force.
		if !slices.ContainsFunc(cr.tools, func(t llm.ToolSpec) bool { return t.Name == cr.choice }) {
			return refuseParam("tool_choice", "%q: not a tool of the request's (a caller forces a call of its own tools only)", cr.choice)
		}
	}
	if m := l.agent.Mode(); m != "" && m != spec.ModeTools {
		return refuseParam("tool_choice", "a %s agent's model is not given tools to choose from", m)
	}
	l.choice = cr.choice
	return nil
}

// answering reads the tool results that end a request (results, each
// with its call id and output, param naming where): when they answer
// calls a run handed back, that run and the answers by key; "" when
// there are none. Results of calls of no run of this server's are
// refused: a run starts from a user's message.
func answering(results []toolAnswer) (runID string, answers map[string]string, err error) {
	if len(results) == 0 {
		return "", nil, nil
	}
	answers = map[string]string{}
	for _, r := range results {
		id, _, ok := strings.Cut(r.callID, ":")
		if !ok || strings.Count(r.callID, ":") != 2 {
			return "", nil, refuseParam(r.param, "%q answers no call a run of this server handed back (their ids are RUN_ID:TURN:INDEX); a run starts from a user's message", r.callID)
		}
		if runID != "" && id != runID {
			return "", nil, refuseParam(r.param, "%q answers a call of run %s, and an earlier result one of run %s: answer one run's calls", r.callID, id, runID)
		}
		runID, answers[r.callID] = id, r.output
	}
	return runID, answers, nil
}

// toolAnswer is a tool result a request ends with.
type toolAnswer struct {
	param, callID, output string
}

// goOn resumes the run that handed calls back with their answers, for
// the caller of ctx, listened to by listen; its channel gets its Result.
// The run's tools are those it started with, and what was said before
// is what it holds: the request's earlier messages are not read again.
func (s *Server) goOn(ctx context.Context, model *agent.Agent, cr *callerRun, listen ...agent.RunOption) (store.Run, <-chan any, *refusal) {
	run, err := s.cfg.Store.Get(ctx, cr.goesOn)
	c := callerOf(ctx)
	switch {
	case errors.Is(err, store.ErrNotFound), err == nil && !c.sees(run.User):
		return run, nil, &refusal{http.StatusNotFound, "not_found", fmt.Sprintf("no run %q handed calls back", cr.goesOn)}
	case err != nil:
		return run, nil, &refusal{http.StatusInternalServerError, "store_error", "the run store failed to read the run"}
	case !c.decides(run.User):
		return run, nil, &refusal{http.StatusForbidden, "forbidden", fmt.Sprintf("run %s is %s's: only its own user gives its calls' results", run.ID, ownerName(run.User))}
	case run.Name != model.Name():
		return run, nil, &refusal{http.StatusBadRequest, "unsupported_parameter", fmt.Sprintf("run %s is agent %s's, not %s's", run.ID, run.Name, model.Name())}
	case run.Status != store.AwaitingApproval:
		return run, nil, &refusal{http.StatusConflict, "conflict", fmt.Sprintf("run %s is %s: it waits for no results", run.ID, run.Status)}
	}
	opts := listen
	for _, key := range slices.Sorted(maps.Keys(cr.answers)) {
		opts = append(opts, agent.CallerResult(key, cr.answers[key]))
	}
	sess, a, rf := s.resumeRun(ctx, run, resumeRequest{}, s.admitted, opts...)
	if rf != nil {
		return run, nil, rf
	}
	return run, s.background(sess, a, true, goesOnAs(ctx)), nil
}

// handedBack are the calls res handed back to its caller, in order.
func handedBack(res *agent.Result) []agent.ApprovalError {
	var out []agent.ApprovalError
	for _, w := range res.Waiting {
		if w.Rule == agent.RuleCaller {
			out = append(out, w)
		}
	}
	return out
}
