package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"iter"
	"strings"
	"sync"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2asrv"

	"github.com/agentry/agentry/agent"
	"github.com/agentry/agentry/event"
	"github.com/agentry/agentry/spec"
	"github.com/agentry/agentry/store"
)

// a2aExecutor runs A2A tasks as agentry runs: a message that starts a
// task starts a run of the agent the request's path names, in the
// session of the task's context; a message that answers a task waiting
// for input (a run awaiting approval) decides the calls it waits for and
// resumes it; a cancel aborts the run.
type a2aExecutor struct {
	s  *Server
	mu sync.Mutex
	// runs are the runs the executions follow now, by task: what a
	// cancel aborts. A task canceled before its run began has a nil
	// session: its execution does not start one.
	runs map[a2a.TaskID]*a2aRun
}

// a2aRun is the run of a task being executed.
type a2aRun struct {
	id       string
	sess     *agent.Session // nil: the task was canceled before the run began
	canceled bool           // a cancel aborted it: the cancel's event ends the task
}

// canceled reports whether a cancel of the task aborted its run.
func (x *a2aExecutor) canceled(task a2a.TaskID) bool {
	x.mu.Lock()
	defer x.mu.Unlock()
	r := x.runs[task]
	return r != nil && r.canceled
}

// track makes sess the run a cancel of the task aborts, before the run
// begins; false when the task was canceled already (the caller must not
// run sess).
func (x *a2aExecutor) track(task a2a.TaskID, sess *agent.Session) bool {
	x.mu.Lock()
	defer x.mu.Unlock()
	if r, ok := x.runs[task]; ok && r.sess == nil {
		delete(x.runs, task)
		return false
	}
	x.runs[task] = &a2aRun{id: sess.RunID(), sess: sess}
	return true
}

func (x *a2aExecutor) untrack(task a2a.TaskID) {
	x.mu.Lock()
	delete(x.runs, task)
	x.mu.Unlock()
}

// yielder hands an event to the SDK; false: it takes no more.
type yielder = func(a2a.Event, error) bool

// Execute implements a2asrv.AgentExecutor.
func (x *a2aExecutor) Execute(ctx context.Context, ec *a2asrv.ExecutorContext) iter.Seq2[a2a.Event, error] {
	return func(yield yielder) {
		t, _ := ctx.Value(a2aTargetKey{}).(*a2aTarget)
		switch {
		case t == nil: // not reached: the routes set it
			yield(nil, a2a.NewError(a2a.ErrInternalError, "the request names no agent"))
		case ec.StoredTask == nil:
			x.start(ctx, t, ec, yield)
		default:
			x.answer(ctx, t, ec, yield)
		}
	}
}

// start starts a run of the target agent on the message: the task is
// rejected when the message is not an input the agent takes.
func (x *a2aExecutor) start(ctx context.Context, t *a2aTarget, ec *a2asrv.ExecutorContext, yield yielder) {
	task := a2a.NewSubmittedTask(ec, ec.Message)
	sp := t.agent.Spec()
	input, err := messageInput(t.agent, ec)
	if err != nil {
		task.Status = a2a.TaskStatus{State: a2a.TaskStateRejected, Message: agentSays(ec, err.Error())}
		yield(task, nil)
		return
	}
	f := newA2AFollower(ec, &sp)
	l := &launch{agent: t.agent, input: input, session: ec.ContextID, trace: t.trace, listen: f.listener(),
		metadata: map[string]string{"a2a_task_id": string(ec.TaskID), "a2a_context_id": ec.ContextID}, begun: f.run}
	slot, track := func() *refusal { return x.s.claimSlot(ctx) }, func(sess *agent.Session) bool { return x.track(ec.TaskID, sess) }
	var done <-chan any
	var rf *refusal
	if x.s.joinSession(ctx, t.agent, l) { // every task of the context starts from the ones before
		_, done, rf = x.s.converseOn(ctx, l, "refuse", slot, track)
	} else {
		_, done, rf = x.s.start(ctx, l, slot, track)
	}
	if rf != nil {
		task.Status = a2a.TaskStatus{State: a2a.TaskStateRejected, Message: agentSays(ec, rf.message)}
		yield(task, nil)
		return
	}
	task.Metadata = f.meta(nil)
	if done == nil { // track refused it
		task.Status = a2a.TaskStatus{State: a2a.TaskStateCanceled, Message: agentSays(ec, "The task was canceled before its run began.")}
		yield(task, nil)
		return
	}
	defer x.untrack(ec.TaskID)
	x.follow(ec, f, done, yield, task)
}

// messageInput is the run's input from the message, as the
// OpenAI-compatible endpoint takes a user message: its text parts, or
// its data part (a JSON object), as the agent's one input key, its
// input, or "task".
func messageInput(a *agent.Agent, ec *a2asrv.ExecutorContext) (map[string]any, error) {
	if len(ec.ContextID) > maxThreadID {
		return nil, fmt.Errorf("contextId is over %d bytes", maxThreadID)
	}
	var text strings.Builder
	for _, p := range ec.Message.Parts {
		switch {
		case p.Data() != nil:
			if _, ok := p.Data().(map[string]any); !ok {
				return nil, errors.New("a data part of the message is not a JSON object")
			}
			b, _ := json.Marshal(p.Data())
			text.Write(b)
		case p.URL() != "" || p.Raw() != nil:
			return nil, errors.New("the message has a file part: this agent takes text and JSON data only")
		default:
			text.WriteString(p.Text())
		}
	}
	return a.MessageInput(text.String())
}

// follow yields first, the task working, then the run's progress as it
// goes (its thoughts and tool calls as status messages, the answer's
// text as it comes as the answer artifact), then its end.
func (x *a2aExecutor) follow(ec *a2asrv.ExecutorContext, f *a2aFollower, done <-chan any, yield yielder, first a2a.Event) {
	if first != nil && !yield(first, nil) {
		return
	}
	if !yield(f.status(a2a.TaskStateWorking, nil, nil), nil) {
		return
	}
	for {
		select {
		case <-f.text.ready:
			for _, ev := range f.events(f.text.take()) {
				if !yield(ev, nil) {
					return
				}
			}
		case v := <-done:
			if x.canceled(ec.TaskID) {
				return // the cancel's canceled status is the task's last event: no other may follow it
			}
			evs := append(f.events(f.text.take()), f.final(v.(*agent.Result))...)
			for _, ev := range evs {
				if !yield(ev, nil) {
					return
				}
			}
			return
		}
	}
}

// Cancel implements a2asrv.AgentExecutor: the task's run is aborted (a
// run going ends aborted; a run waiting for approval, resumed aborted),
// and the task is canceled.
func (x *a2aExecutor) Cancel(ctx context.Context, ec *a2asrv.ExecutorContext) iter.Seq2[a2a.Event, error] {
	return func(yield yielder) {
		var runID string
		var going *agent.Session
		x.mu.Lock()
		if r := x.runs[ec.TaskID]; r != nil {
			runID, going = r.id, r.sess
			r.canceled = going != nil
		} else {
			x.runs[ec.TaskID] = &a2aRun{} // its execution, if it has not begun its run, begins none
		}
		x.mu.Unlock()
		if runID == "" && ec.StoredTask != nil {
			runID = runOf(ec.StoredTask.Metadata)
		}
		msg := "The task was canceled."
		switch {
		case going != nil:
			going.Abort() // before its run began too: it ends aborted at once, on record
			msg = fmt.Sprintf("The task was canceled: run %s was aborted.", runID)
		case runID != "":
			if err := x.abortPaused(ctx, runID); err != nil {
				msg = fmt.Sprintf("The task was canceled, but run %s was not aborted: %v", runID, err)
			} else {
				msg = fmt.Sprintf("The task was canceled: run %s, which waited for approval, was aborted.", runID)
			}
		}
		ev := a2a.NewStatusUpdateEvent(ec, a2a.TaskStateCanceled, agentSays(ec, msg))
		ev.Metadata = map[string]any{"agentry": map[string]any{"runId": runID}}
		yield(ev, nil)
	}
}

// abortPaused ends a run that waits for approval as aborted: it is
// resumed, deciding nothing, and aborted before it goes on.
func (x *a2aExecutor) abortPaused(ctx context.Context, runID string) error {
	run, err := x.s.cfg.Store.Get(ctx, runID)
	if err != nil || run.Status == store.Aborted { // aborted by a cancel the SDK did not apply
		return err
	}
	sess, a, rf := x.s.resumeRun(ctx, run, resumeRequest{}, x.s.admitted)
	if rf != nil {
		return rf
	}
	sess.Abort()
	<-x.s.background(sess, a, true, goesOnAs(ctx))
	return nil
}

// runOf is the agentry run a task's metadata names.
func runOf(meta map[string]any) string {
	m, _ := meta["agentry"].(map[string]any)
	id, _ := m["runId"].(string)
	return id
}

// agentSays is a message of the agent's on the task, of text and data
// parts (data: plain JSON values, as the SDK's task store copies them).
func agentSays(ec *a2asrv.ExecutorContext, text string, data ...any) *a2a.Message {
	parts := []*a2a.Part{a2a.NewTextPart(text)}
	for _, d := range data {
		parts = append(parts, a2a.NewDataPart(plainJSON(d)))
	}
	return a2a.NewMessageForTask(a2a.MessageRoleAgent, ec, parts...)
}

// plainJSON is v as JSON decodes it: maps, slices, strings, numbers.
func plainJSON(v any) any {
	b, err := json.Marshal(v)
	if err != nil {
		return nil
	}
	var out any
	json.Unmarshal(b, &out)
	return out
}

// a2aFollower turns a run's events and its Result into the task's
// events.
type a2aFollower struct {
	ec       *a2asrv.ExecutorContext
	sp       *spec.Spec
	runID    string
	text     *chunks
	artifact a2a.ArtifactID
	sent     bool // the answer artifact exists
}

func newA2AFollower(ec *a2asrv.ExecutorContext, sp *spec.Spec) *a2aFollower {
	return &a2aFollower{ec: ec, sp: sp, artifact: a2a.NewArtifactID(),
		text: &chunks{ready: make(chan struct{}, 1), live: len(sp.Tools) == 0, calls: true}}
}

// run sets the run followed, before it starts: its sub-runs' events are
// not its own.
func (f *a2aFollower) run(id string) { f.runID, f.text.runID = id, id }

// listener subscribes to the run's text and tool calls, on the run's
// goroutine (Inline: none is dropped; add never blocks).
func (f *a2aFollower) listener() agent.RunOption {
	return agent.WithEvents(f.text.add, event.Inline(), event.Types(event.ContentChunk, event.ToolCallStart, event.TurnEnd))
}

// meta is the task's metadata: the run's id and agent, and more.
func (f *a2aFollower) meta(more map[string]any) map[string]any {
	m := map[string]any{"runId": f.runID, "agent": f.sp.AgentName + "@" + f.sp.Version}
	for k, v := range more {
		m[k] = v
	}
	return map[string]any{"agentry": m}
}

// status is a status update of the task, with a message of the agent's
// when text is not "".
func (f *a2aFollower) status(state a2a.TaskState, more map[string]any, msg *a2a.Message) *a2a.TaskStatusUpdateEvent {
	ev := a2a.NewStatusUpdateEvent(f.ec, state, msg)
	ev.Metadata = f.meta(more)
	return ev
}

// events are the task's events for the run's pieces: a tool call or a
// thought is a working status with a message; the answer's text is
// appended to the answer artifact.
func (f *a2aFollower) events(pieces []piece) []a2a.Event {
	var out []a2a.Event
	for _, p := range pieces {
		switch {
		case p.tool != "":
			out = append(out, f.status(a2a.TaskStateWorking, map[string]any{"tool": p.tool}, agentSays(f.ec, "Calling the tool "+p.tool+".")))
		case p.text == "":
		case p.reasoning:
			out = append(out, f.status(a2a.TaskStateWorking, nil, agentSays(f.ec, p.text)))
		default:
			ev := a2a.NewArtifactUpdateEvent(f.ec, f.artifact, a2a.NewTextPart(p.text))
			ev.Artifact.Name, ev.Append = "answer", f.sent
			f.sent = true
			out = append(out, ev)
		}
	}
	return out
}

// final is the task's end for the run's Result: input-required while it
// waits for approval, canceled when it was aborted, failed when it
// failed (or the server stopped it), and otherwise the answer artifact,
// whole (replacing what streamed), and completed.
func (f *a2aFollower) final(res *agent.Result) []a2a.Event {
	end := map[string]any{"status": string(res.TerminateReason), "outcome": string(res.Outcome), "tokens": res.TokenUsage.TotalTokens}
	switch {
	case res.TerminateReason == agent.ReasonAwaitingApproval:
		return []a2a.Event{f.status(a2a.TaskStateInputRequired, end, f.approvalAsk(res, ""))}
	case res.TerminateReason == agent.ReasonAborted:
		return []a2a.Event{f.status(a2a.TaskStateCanceled, end, agentSays(f.ec, fmt.Sprintf("Run %s was aborted.", res.ID)))}
	case res.Error != nil && res.Outcome == agent.OutcomeError:
		end["code"] = res.Error.Code
		return []a2a.Event{f.status(a2a.TaskStateFailed, end, agentSays(f.ec, fmt.Sprintf("%s: %s", res.Error.Code, res.Error.Message)))}
	}
	parts := []*a2a.Part{a2a.NewTextPart(answerText(res))}
	if _, text := res.Result.(string); len(f.sp.OutputSchema) > 0 && res.Result != nil && !text {
		parts = append(parts, a2a.NewDataPart(plainJSON(res.Result)))
	}
	art := a2a.NewArtifactUpdateEvent(f.ec, f.artifact, parts...)
	art.Artifact.Name, art.Append, art.LastChunk = "answer", false, true
	var msg *a2a.Message
	if res.Outcome == agent.OutcomePartial {
		// A budget, the turns or the time ran out: the answer is what the
		// run has.
		msg = agentSays(f.ec, fmt.Sprintf("The answer is partial: the run ended %s.", res.TerminateReason))
	}
	return []a2a.Event{art, f.status(a2a.TaskStateCompleted, end, msg)}
}

// approvalAsk is what a task waiting for input says: the calls the run
// waits for, and how to answer (why the last answer was not one, when
// it was not).
func (f *a2aFollower) approvalAsk(res *agent.Result, why string) *a2a.Message {
	var calls []agent.ApprovalError
	if res != nil {
		calls = res.Waiting
	}
	text := fmt.Sprintf("Run %s waits for a person's approval of tool calls (the data part lists them). "+
		`Answer on this task with a data part {"approved": true} to approve them all, {"approved": false, "reason": "…"} to deny them, `+
		`or {"approve": [KEY…], "deny": [KEY…], "reason": "…"}; anything else leaves the task waiting. `+
		"Or decide in the viewer, or with POST /v1/runs/%s/resume.", f.runID, f.runID)
	if why != "" {
		text = why + " " + text
	}
	return agentSays(f.ec, text, map[string]any{"runId": f.runID, "calls": calls})
}
