package server

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/agentry/agentry/agent"
	"github.com/agentry/agentry/event"
	"github.com/agentry/agentry/store"
)

// aguiProtocol is the AG-UI protocol version the stream speaks (its
// RUN_STARTED says so).
const aguiProtocol = "1.0"

// aguiStream is one AG-UI run of an agentry run: the run's events, kept
// as they come (the run never waits for the client), written by the
// handler as AG-UI events. Message ids are the agentry run's, its turn's
// and the kind's, so that they stay unique across the AG-UI runs of one
// agentry run (a pause and its resume).
type aguiStream struct {
	threadID, runID string // the AG-UI run's
	agent           string // NAME@VERSION
	live            bool   // no tools: every turn's text is the answer, sent as it comes
	// state is the client's state with the run's progress under
	// "agentry"; nil when the client's state is not an object, which
	// the stream then leaves alone.
	state map[string]any
	// agentRun is the agentry run, set before it starts. A resumed run
	// writes the turn it took over at again: the client had that turn's
	// events, so of that turn (replayTurn; -1 until its turn_start) only
	// the results of the calls the resume answered are sent.
	agentRun   string
	replayTurn int
	answered   map[string]bool

	mu    sync.Mutex
	queue []event.Event
	ready chan struct{} // a signal that queue has more

	// The handler's alone.
	out    sseWriter
	text   string          // the text message open, or ""
	held   strings.Builder // the turn's text, until the turn shows whether it is a thought
	sent   strings.Builder // the answer's text sent
	step   string          // the step open, or ""
	paused map[string]bool // calls the policy paused: the interrupt stands for their result
}

func newAGUIStream(in *aguiInput, agentName string, live bool) *aguiStream {
	st := &aguiStream{threadID: in.ThreadID, runID: in.RunID, agent: agentName, live: live,
		answered: map[string]bool{}, paused: map[string]bool{}, ready: make(chan struct{}, 1)}
	var state map[string]any
	if len(in.State) == 0 || string(in.State) == "null" {
		state = map[string]any{}
	} else if json.Unmarshal(in.State, &state) != nil {
		state = nil // an array or a value: not the stream's to change
	}
	if state != nil {
		st.state = maps.Clone(state)
	}
	return st
}

// add keeps an event of the stream's run for the handler; the run's
// goroutine calls it, and it never blocks.
func (st *aguiStream) add(e event.Event) {
	if e.RunID != st.agentRun {
		return // a sub-agent's
	}
	st.mu.Lock()
	st.queue = append(st.queue, e)
	st.mu.Unlock()
	select {
	case st.ready <- struct{}{}:
	default:
	}
}

func (st *aguiStream) take() []event.Event {
	st.mu.Lock()
	defer st.mu.Unlock()
	q := st.queue
	st.queue = nil
	return q
}

// stream writes the AG-UI run: RUN_STARTED and the state, the run's
// events as they come, then the run's end (RUN_FINISHED, with an
// interrupt when it waits for approval, or RUN_ERROR). A quiet stream
// gets a comment every heartbeat. The run goes on if the client goes.
func (st *aguiStream) stream(ctx context.Context, w http.ResponseWriter, done <-chan any, heartbeat time.Duration) {
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	h.Set("X-Accel-Buffering", "no")
	h.Set("X-Agentry-Run-Id", st.agentRun)
	w.WriteHeader(http.StatusOK)
	st.out = sseWriter{w: w, rc: http.NewResponseController(w)}
	st.emit("RUN_STARTED", map[string]any{"threadId": st.threadID, "runId": st.runID, "protocolVersion": aguiProtocol,
		"metadata": map[string]any{"agentry": map[string]any{"runId": st.agentRun, "agent": st.agent}}})
	st.snapshot(map[string]any{"status": "running"})
	tick := time.NewTicker(heartbeat)
	defer tick.Stop()
	for st.out.flush() {
		select {
		case <-ctx.Done():
			return // the run goes on
		case <-st.ready:
			st.handle(st.take())
		case <-tick.C:
			st.out.comment("heartbeat")
		case v := <-done:
			st.handle(st.take()) // the run has emitted all its events before its Result
			st.finish(v.(*agent.Result))
			st.out.flush()
			return
		}
	}
}

// handle writes events as AG-UI's: a turn is a step; the text of a turn
// that calls a tool is a thought (reasoning), the text of one that does
// not the answer (a text message); each tool call is sent whole, then
// its result, except for a call waiting for approval, which the run's
// interrupt stands for.
func (st *aguiStream) handle(events []event.Event) {
	for i := range events {
		e := &events[i]
		if st.replayTurn == -1 && e.Type == event.TurnStart {
			st.replayTurn = e.Turn
		}
		replay := st.replayTurn > 0 && e.Turn == st.replayTurn
		switch e.Type {
		case event.TurnStart:
			st.closeStep()
			st.step = fmt.Sprintf("turn %d", e.Turn)
			st.emit("STEP_STARTED", map[string]any{"stepName": st.step})
		case event.ContentChunk:
			switch {
			case replay:
			case st.live:
				st.textOut(st.id(e.Turn, "text"), e.Content)
			default:
				st.held.WriteString(e.Content)
			}
		case event.Thinking:
			st.held.Reset() // the turn's text was this thought
			if !replay {
				st.reasoning(e.Turn, e.Content)
			}
		case event.ToolCallStart:
			st.held.Reset()
			if !replay && e.Tool != nil {
				st.toolCall(e.Tool)
			}
		case event.PolicyDecision:
			if id, ok := e.Data["call_id"].(string); ok && e.Data["decision"] == "pause" {
				st.paused[id] = true
			}
		case event.ToolCallEnd:
			// A call that waits (for approval, or handed back to the
			// front-end) has no result yet.
			if e.Tool != nil && !st.paused[e.Tool.ID] && e.Tool.Status != "awaiting_approval" && (!replay || st.answered[e.Tool.ID]) {
				st.emit("TOOL_CALL_RESULT", map[string]any{"messageId": st.id(e.Turn, "result/"+e.Tool.ID), "toolCallId": e.Tool.ID,
					"role": "tool", "content": resultText(e.Tool)})
			}
		case event.TurnEnd:
			if st.held.Len() > 0 && !replay {
				st.textOut(st.id(e.Turn, "text"), st.held.String()) // a turn that called no tool: its text is the answer
			}
			st.held.Reset()
			st.closeText()
			st.closeStep()
			st.progress(e)
		}
	}
}

// id is a message's id: the agentry run's, the turn's, and the kind's.
func (st *aguiStream) id(turn int, kind string) string {
	return fmt.Sprintf("%s/%d/%s", st.agentRun, turn, kind)
}

// textOut adds text to the text message open, or opens one with id.
func (st *aguiStream) textOut(id, text string) {
	if text == "" {
		return
	}
	if st.text == "" {
		st.text = id
		st.emit("TEXT_MESSAGE_START", map[string]any{"messageId": st.text, "role": "assistant"})
	}
	st.emit("TEXT_MESSAGE_CONTENT", map[string]any{"messageId": st.text, "delta": text})
	st.sent.WriteString(text)
}

func (st *aguiStream) closeText() {
	if st.text != "" {
		st.emit("TEXT_MESSAGE_END", map[string]any{"messageId": st.text})
		st.text = ""
	}
}

func (st *aguiStream) closeStep() {
	if st.step != "" {
		st.emit("STEP_FINISHED", map[string]any{"stepName": st.step})
		st.step = ""
	}
}

// reasoning sends a thought as a reasoning message in a reasoning span.
func (st *aguiStream) reasoning(turn int, text string) {
	if text == "" {
		return
	}
	st.closeText()
	span, msg := st.id(turn, "reasoning"), st.id(turn, "thought")
	st.emit("REASONING_START", map[string]any{"messageId": span})
	st.emit("REASONING_MESSAGE_START", map[string]any{"messageId": msg, "role": "reasoning"})
	st.emit("REASONING_MESSAGE_CONTENT", map[string]any{"messageId": msg, "delta": text})
	st.emit("REASONING_MESSAGE_END", map[string]any{"messageId": msg})
	st.emit("REASONING_END", map[string]any{"messageId": span})
}

// toolCall sends a tool call whole: its start, its arguments, its end.
func (st *aguiStream) toolCall(tc *event.ToolCall) {
	st.closeText()
	st.emit("TOOL_CALL_START", map[string]any{"toolCallId": tc.ID, "toolCallName": tc.Name})
	if len(tc.Arguments) > 0 {
		st.emit("TOOL_CALL_ARGS", map[string]any{"toolCallId": tc.ID, "delta": string(tc.Arguments)})
	}
	st.emit("TOOL_CALL_END", map[string]any{"toolCallId": tc.ID})
}

// resultText is a tool call's result as the client sees it: its output
// (JSON), or why it has none.
func resultText(tc *event.ToolCall) string {
	if tc.Status != "success" {
		return tc.Error
	}
	return string(tc.Output)
}

// progress tells the client's state how far the run is, at a turn's end.
func (st *aguiStream) progress(e *event.Event) {
	if st.state == nil {
		return
	}
	st.emit("STATE_DELTA", map[string]any{"delta": []map[string]any{
		{"op": "add", "path": "/agentry/turn", "value": e.Turn},
		{"op": "add", "path": "/agentry/tokens", "value": e.TotalTokens}}})
}

// snapshot sends the client's state with the run's progress under
// "agentry": the run, its agent, and more.
func (st *aguiStream) snapshot(more map[string]any) {
	if st.state == nil {
		return
	}
	progress := map[string]any{"runId": st.agentRun, "agent": st.agent}
	maps.Copy(progress, more)
	st.state["agentry"] = progress
	st.emit("STATE_SNAPSHOT", map[string]any{"snapshot": st.state})
}

// finish ends the AG-UI run as the agentry run ended: the rest of the
// answer as text (all of it, when the model did not stream), the final
// state, then RUN_FINISHED (its result; an interrupt for each call
// waiting for approval; cancelled when aborted) or RUN_ERROR.
func (st *aguiStream) finish(res *agent.Result) {
	st.closeText()
	status, _ := res.StoreStatus()
	var code, message string
	switch {
	case res.TerminateReason == agent.ReasonAwaitingApproval, res.Error == nil:
	case res.Error.Code == agent.CodeInterrupted:
		status = store.Interrupted
		code, message = res.Error.Code, fmt.Sprintf("the server stopped before run %s ended: it goes on when a server starts with --resume-interrupted", res.ID)
	default:
		if s, c, m := failure(res); s != 0 {
			code, message = c, m
		}
	}
	if status == store.Completed || (status == store.Failed && code == "") {
		if rest, ok := strings.CutPrefix(answerText(res), st.sent.String()); ok && rest != "" {
			st.textOut(st.id(res.Iterations, "answer"), rest)
			st.closeText()
		}
	}
	st.closeStep()
	st.snapshot(map[string]any{"status": status, "outcome": res.Outcome, "turn": res.Iterations, "tokens": res.TokenUsage.TotalTokens})
	end := map[string]any{"threadId": st.threadID, "runId": st.runID}
	switch {
	case code != "":
		st.emit("RUN_ERROR", map[string]any{"code": code, "message": message})
		return
	case status == store.AwaitingApproval && len(interruptsOf(res)) > 0:
		end["outcome"] = map[string]any{"type": "interrupt", "interrupts": interruptsOf(res)}
	case status == store.AwaitingApproval:
		end["outcome"] = map[string]any{"type": "success"} // the front-end runs the calls handed back, then goes on
	case status == store.Aborted:
		end["outcome"] = map[string]any{"type": "cancelled"}
	default:
		end["outcome"] = map[string]any{"type": "success"}
		if res.Result != nil {
			end["result"] = res.Result
		}
	}
	st.emit("RUN_FINISHED", end)
}

// approvalSchema is the answer an approval interrupt expects (AG-UI's
// pattern for a tool approval): approved true runs the call; false, or
// anything else, denies it, with the reason if one is given.
var approvalSchema = map[string]any{"type": "object", "required": []string{"approved"}, "properties": map[string]any{
	"approved": map[string]any{"type": "boolean"},
	"reason":   map[string]any{"type": "string", "description": "why the call is denied"}}}

// interruptsOf are AG-UI's interrupts for the calls a paused run waits
// on: each one's id is the call's idempotency key, which a resume
// answers.
func interruptsOf(res *agent.Result) []map[string]any {
	out := make([]map[string]any, 0, len(res.Waiting))
	for _, c := range res.Waiting {
		if c.Rule == agent.RuleCaller {
			continue // the front-end's tool's call: sent as a tool call, the front-end runs it
		}
		msg := fmt.Sprintf("%s (call %s) waits for a person's approval (policy.%s): approve or deny it", c.Tool, c.CallID, c.Rule)
		if c.Rule == "" {
			msg = fmt.Sprintf("%s (call %s) may have taken effect before the run stopped: approve to send it again, or deny it", c.Tool, c.CallID)
		}
		out = append(out, map[string]any{"id": c.Key, "reason": "tool_call", "toolCallId": c.CallID, "message": msg,
			"responseSchema": approvalSchema, "metadata": map[string]any{"agentry": map[string]any{"runId": res.ID, "tool": c.Tool}}})
	}
	return out
}

// emit writes one AG-UI event.
func (st *aguiStream) emit(typ string, fields map[string]any) {
	fields["type"] = typ
	fields["timestamp"] = time.Now().UnixMilli()
	st.out.send(fields)
}

// sseWriter writes server-sent events of data lines, and remembers the
// first failure: a client gone, or one that stopped reading (given
// writeTimeout to take each flush).
type sseWriter struct {
	w   http.ResponseWriter
	rc  *http.ResponseController
	err error
}

func (o *sseWriter) send(v any) {
	if o.err != nil {
		return
	}
	b, err := json.Marshal(v)
	if err == nil {
		_, err = fmt.Fprintf(o.w, "data: %s\n\n", b)
	}
	o.err = err
}

func (o *sseWriter) comment(text string) {
	if o.err == nil {
		_, o.err = fmt.Fprintf(o.w, ": %s\n\n", text)
	}
}

// flush sends what was written; false once the stream failed.
func (o *sseWriter) flush() bool {
	if o.err == nil {
		o.rc.SetWriteDeadline(time.Now().Add(writeTimeout))
		o.err = o.rc.Flush()
	}
	return o.err == nil
}
