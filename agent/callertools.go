package agent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/agentry/agentry/internal/journal"
	"github.com/agentry/agentry/runlog"
	"github.com/agentry/agentry/schema"
	"github.com/agentry/agentry/spec"
	"github.com/agentry/agentry/store"
	"github.com/agentry/agentry/tool"
)

// RuleCaller is the Rule of an ApprovalError whose call is a caller's
// tool's (spec.Spec.CallerTools): the run handed it back, and it waits
// for its result (CallerResult), not for a person's approval.
const RuleCaller = "caller"

// callerTool is a tool of the spec's caller_tools: the model may call
// it, and the run hands each call back to its caller instead of running
// it (runJournal.handBack).
type callerTool struct {
	info tool.Info
	args *schema.Schema // its parameters: a call's arguments are checked before it is handed back
}

func (t callerTool) Info() tool.Info { return t.info }

// Call is reached only by a run without a store, which NewSession
// refuses; it answers as a failed call, never silently.
func (t callerTool) Call(context.Context, json.RawMessage) (json.RawMessage, error) {
	return nil, fmt.Errorf("tool %s is the caller's: a run hands its calls back only when it is stored", t.info.Name)
}

// bindCallerTools offers the model the spec's caller_tools beside the
// agent's own.
func (a *Agent) bindCallerTools() []string {
	var problems []string
	for i, ts := range a.spec.CallerTools {
		// The caller's tool is run once, by the caller, whatever its
		// class: it is never sent twice from here.
		info := tool.Info{Name: ts.Name, Description: ts.Description, Parameters: ts.Parameters, Idempotency: tool.Idempotent}
		if len(info.Parameters) == 0 {
			info.Parameters = json.RawMessage(`{"type":"object"}`)
		}
		args, err := schema.Compile(info.Parameters)
		if err != nil {
			problems = append(problems, fmt.Sprintf("caller_tools[%d] %q: parameters: %v", i, ts.Name, err))
			continue
		}
		if err := a.addBinding(&binding{tool: callerTool{info, args}}); err != nil {
			problems = append(problems, fmt.Sprintf("caller_tools[%d]: %v", i, err))
		}
	}
	return problems
}

// handBack hands a call of a caller's tool back to the run's caller: the
// run pauses on it, as on a call held for approval, until a resume gives
// its result (CallerResult) or denies it (Deny). A call whose arguments
// do not match the tool's parameters is not handed back: the model is
// told, as for a tool of its own, and may correct it.
func (j *runJournal) handBack(ctx context.Context, call *tool.Call, t callerTool) (tool.Output, error) {
	key := call.Key()
	if err := t.args.ValidateJSON(call.Arguments); err != nil {
		var ve *schema.ValidationError
		probs := []string{err.Error()}
		if errors.As(err, &ve) {
			probs = ve.Strings()
		}
		ae := &tool.ArgumentError{Tool: call.Name, Problems: probs}
		j.add(store.KindToolResult, call.Turn, key, journal.NewToolResult(call, tool.Output{}, ae, call.Started))
		return tool.Output{}, ae
	}
	if approved, decided := j.r.s.cfg.decisions[key]; decided && !approved {
		d := &tool.ErrorDetails{Type: "denied", Recoverable: false,
			Message: fmt.Sprintf("the caller did not run %s (%s)", call.ID, call.Name)}
		if reason := j.r.s.cfg.denyReason(); reason != "" {
			d.Message += ": " + reason
		}
		j.add(store.KindToolResult, call.Turn, key, journal.NewToolResult(call, tool.Output{}, d, call.Started))
		return tool.Output{}, d
	}
	if err := j.r.abortAfterLog(); err != nil {
		return tool.Output{}, err // aborted while it waited
	}
	j.add(store.KindApproval, call.Turn, key, runlog.Approval{CallID: call.ID, Tool: call.Name, Arguments: string(call.Arguments), Rule: RuleCaller})
	return tool.Output{}, &ApprovalError{CallID: call.ID, Tool: call.Name, Key: key, Arguments: call.Arguments, Rule: RuleCaller}
}

// CallerResult gives a stored run the result of a call it handed back to its
// caller (a tool of the spec's caller_tools), by the call's idempotency
// key or its call id, for Resume: the model is shown output as the
// tool's result (JSON as it is, other text as text).
func CallerResult(callID, output string) RunOption {
	return func(c *runConfig) {
		e := c.more()
		if e.answers == nil {
			e.answers = map[string]string{}
		}
		e.answers[callID] = output
	}
}

// bindAnswers binds each answer given (by key, or by call id) to the
// caller's call it names, which must wait in l, as the call's result.
func bindAnswers(l *runlog.Log, answers map[string]string, into map[string]runlog.ToolResult) error {
	w := l.Waiting()
	for _, given := range slices.Sorted(maps.Keys(answers)) {
		keys := runlog.Named(w, given)
		switch {
		case len(keys) > 1:
			return fmt.Errorf("%w: %q in run %s names %d waiting calls; answer one of their keys (%s)",
				ErrNoSuchCall, given, l.Start.RunID, len(keys), strings.Join(keys, ", "))
		case len(keys) == 0:
			return fmt.Errorf("%w: %q in run %s: no call of a caller's tool waits for it (calls waiting: %s)",
				ErrNoSuchCall, given, l.Start.RunID, describeWaiting(w))
		case l.Approvals[keys[0]].Rule != RuleCaller:
			return fmt.Errorf("%w: %q in run %s waits for a person's approval, not for its caller's result: approve or deny it",
				ErrNoSuchCall, given, l.Start.RunID)
		}
		out := answers[given]
		res := runlog.ToolResult{}
		if json.Valid([]byte(out)) {
			res.Output = &out
		} else {
			s := string(journal.JSON(out))
			res.Output, res.Observation = &s, out
		}
		into[keys[0]] = res
	}
	return nil
}

// refuseCallerApprovals refuses an Approve of a call handed back to the
// caller: its result is the caller's to give (CallerResult), and approving it
// would run nothing.
func refuseCallerApprovals(l *runlog.Log, decisions map[string]bool) error {
	for key, ok := range decisions {
		if a, held := l.Approvals[key]; ok && held && a.Rule == RuleCaller {
			return fmt.Errorf("%w: %s (%s) in run %s is a caller's tool's call: its result comes from the caller (CallerResult), not an approval",
				ErrNoSuchCall, key, a.Tool, l.Start.RunID)
		}
	}
	return nil
}

// checkToolChoice refuses a tool choice (WithToolChoice) the agent's
// model cannot be given: a tool it does not have, or any choice in a mode
// whose model is not given tools.
func (a *Agent) checkToolChoice(c *runConfig) error {
	if c.extra == nil {
		return nil
	}
	switch choice := c.extra.toolChoice; {
	case choice == "" || choice == "auto":
		return nil
	case a.spec.Mode != "" && a.spec.Mode != spec.ModeTools:
		return fmt.Errorf("%w: tool choice %q: a %s agent's model is not given tools", ErrConfig, choice, a.spec.Mode)
	case choice == "none" || choice == "required":
		return nil
	case a.table().byName[choice] == nil:
		return fmt.Errorf("%w: tool choice %q: agent %s has no such tool", ErrConfig, choice, a.spec.AgentName)
	}
	return nil
}

// toolChoice is the tool choice of the model call of turn: "none" on
// every turn, another choice on a new run's first only.
func (r *run) toolChoice(turn int) string {
	e := r.s.cfg.extra
	if e == nil || e.toolChoice == "auto" {
		return ""
	}
	if e.toolChoice == "none" || turn == 1 && r.a == r.s.agent {
		return e.toolChoice
	}
	return ""
}
