package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2asrv"

	"github.com/agentry/agentry/runlog"
)

// a2aDecision is the answer a message gives a task whose run waits for
// approval: "approved" decides every waiting call (true approves,
// false denies), or "approve" and "deny" name calls (by call id or
// idempotency key); "reason" says why calls are denied.
type a2aDecision struct {
	Approved *bool    `json:"approved"`
	Approve  []string `json:"approve"`
	Deny     []string `json:"deny"`
	Reason   string   `json:"reason"`
}

// decisionOf is the decision a message holds: its data part, or its
// text as a JSON object, with "approved" a boolean or calls named; an
// error says why it holds none (deny by default would deny on a
// misunderstanding: a message that is no decision decides nothing).
func decisionOf(m *a2a.Message) (*a2aDecision, error) {
	for _, p := range m.Parts {
		raw := []byte(strings.TrimSpace(p.Text()))
		if p.Data() != nil {
			raw, _ = json.Marshal(p.Data())
		}
		var d a2aDecision
		if len(raw) == 0 || raw[0] != '{' || json.Unmarshal(raw, &d) != nil {
			continue
		}
		if d.Approved != nil || len(d.Approve)+len(d.Deny) > 0 {
			return &d, nil
		}
	}
	return nil, errors.New(`The message is no decision: it holds no {"approved": true|false} or {"approve": […], "deny": […]}.`)
}

// answer takes a message on a stored task. A task waiting for input is
// a run awaiting approval: the message's decision resumes it, and the
// task goes on as it goes; a message that decides nothing, or a
// decision the run refuses, leaves the task waiting, told why.
func (x *a2aExecutor) answer(ctx context.Context, t *a2aTarget, ec *a2asrv.ExecutorContext, yield yielder) {
	runID := runOf(ec.StoredTask.Metadata)
	if ec.StoredTask.Status.State != a2a.TaskStateInputRequired || runID == "" {
		yield(nil, a2a.NewError(a2a.ErrUnsupportedOperation, fmt.Sprintf("task %s is %s: only a task waiting for input takes another message", ec.TaskID, ec.StoredTask.Status.State)))
		return
	}
	sp := t.agent.Spec()
	f := newA2AFollower(ec, &sp)
	f.runID = runID
	ask := func(why string) {
		msg := f.approvalAsk(nil, why)
		if prev := ec.StoredTask.Status.Message; prev != nil && len(prev.Parts) > 1 {
			msg.Parts = append(msg.Parts[:1], prev.Parts[1:]...) // the calls, as first listed
		}
		yield(f.status(a2a.TaskStateInputRequired, nil, msg), nil)
	}
	d, err := decisionOf(ec.Message)
	if err != nil {
		ask(err.Error())
		return
	}
	run, err := x.s.cfg.Store.Get(ctx, runID)
	switch {
	case err != nil:
		ask(fmt.Sprintf("Run %s does not read: %v.", runID, err))
		return
	case !sameAgent(t.name, run):
		ask(fmt.Sprintf("Run %s is agent %s@%s's, not %s's: answer it at its own agent's endpoint.", runID, run.Name, run.Version, t.name))
		return
	}
	req := resumeRequest{Approve: d.Approve, Deny: d.Deny, Reason: d.Reason}
	if d.Approved != nil {
		l, err := runlog.Read(ctx, x.s.cfg.Store, runID, x.s.logOptions()...)
		if err != nil {
			ask(fmt.Sprintf("Run %s: its log does not read: %v.", runID, err))
			return
		}
		keys := slices.Sorted(maps.Keys(l.Waiting()))
		if *d.Approved {
			req.Approve = keys
		} else {
			req.Deny = keys
		}
	}
	if req.Reason != "" && len(req.Deny) == 0 {
		req.Reason = "" // a reason says why calls are denied
	}
	sess, a, rf := x.s.resumeRun(ctx, run, req, func() *refusal { return x.s.claimSlot(ctx) }, f.listener())
	if rf != nil {
		ask(rf.message + ".")
		return
	}
	f.run(sess.RunID())
	if !x.track(ec.TaskID, sess) {
		x.s.release()
		a.Close()
		yield(f.status(a2a.TaskStateCanceled, nil, agentSays(ec, "The task was canceled before its run went on.")), nil)
		return
	}
	defer x.untrack(ec.TaskID)
	// The run goes on for the user it acts for; the approver's roles
	// decide what it may do now.
	done := x.s.background(sess, a, true, goesOnAs(ctx))
	x.follow(ec, f, done, yield, nil)
}

// settleTries bounds the waits for an execution to close: 1 ms, then
// twice as long each time, about half a second in all.
const settleTries = 9

// busy says whether err is the SDK's refusal of a message to a task it
// still executes (its error is internal to it: known by its text).
func busy(err error, req *a2a.SendMessageRequest) bool {
	return err != nil && req != nil && req.Message != nil && req.Message.TaskID != "" &&
		strings.Contains(err.Error(), "task execution is already in progress")
}

// settle waits before try i+1; false when ctx ended, or the tries did.
func settle(ctx context.Context, i int) bool {
	if i >= settleTries {
		return false
	}
	t := time.NewTimer(time.Millisecond << i)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}

// stillBusy is the error for a task still busy after the waits.
func stillBusy(req *a2a.SendMessageRequest) error {
	return a2a.NewError(a2a.ErrInvalidRequest, fmt.Sprintf("task %s is working on a message already: send yours once it waits for input", req.Message.TaskID))
}
