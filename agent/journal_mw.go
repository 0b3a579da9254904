package agent

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"iter"
	"strconv"
	"time"

	"github.com/agentry/agentry/internal/journal"
	"github.com/agentry/agentry/llm"
	"github.com/agentry/agentry/policy"
	"github.com/agentry/agentry/runlog"
	"github.com/agentry/agentry/store"
	"github.com/agentry/agentry/tool"
)

// journalOf returns the journal of the run whose context ctx is, or nil.
// A sub-agent's run has its own link, so its calls are not its parent's.
func journalOf(ctx context.Context) *runJournal {
	if l := linkFrom(ctx); l != nil {
		return l.journal
	}
	return nil
}

// journalModel is the provider middleware of the run log, outermost of
// the model chain (around the user's provider middleware, retries and
// fallback): it sees one call per model turn, and a call the log serves
// on resume or replay reaches none of them. Outside a durable run it
// passes calls through.
func journalModel(next llm.Provider) llm.Provider {
	if s, ok := next.(llm.Streamer); ok {
		return &journaledStream{journaled: journaled{next: next}, stream: s}
	}
	return &journaled{next: next}
}

type journaled struct{ next llm.Provider }

func (m *journaled) Generate(ctx context.Context, req *llm.Request) (*llm.Response, error) {
	j := journalOf(ctx)
	if j == nil {
		return m.next.Generate(ctx, req)
	}
	n, digest, resp, err, served := j.beforeModel(ctx, req)
	if served {
		return resp, err
	}
	start := time.Now()
	resp, err = m.next.Generate(ctx, req)
	j.afterModel(n, digest, resp, err, start)
	return resp, err
}

type journaledStream struct {
	journaled
	stream llm.Streamer
}

// Stream passes chunks on as they come and records the assembled reply;
// a reply the log holds is played as one chunk per part.
func (m *journaledStream) Stream(ctx context.Context, req *llm.Request) iter.Seq2[llm.Chunk, error] {
	j := journalOf(ctx)
	if j == nil {
		return m.stream.Stream(ctx, req)
	}
	return func(yield func(llm.Chunk, error) bool) {
		n, digest, resp, err, served := j.beforeModel(ctx, req)
		if served {
			if err != nil {
				yield(llm.Chunk{}, err)
				return
			}
			for _, c := range chunksOf(resp) {
				if !yield(c, nil) {
					return
				}
			}
			return
		}
		start := time.Now()
		stopped := false
		resp, err = llm.Collect(m.stream.Stream(ctx, req), func(c llm.Chunk) {
			if !stopped && !yield(c, nil) {
				stopped = true
			}
		})
		j.afterModel(n, digest, resp, err, start)
		if err != nil && !stopped {
			yield(llm.Chunk{}, err)
		}
	}
}

// chunksOf is a recorded reply as a stream.
func chunksOf(r *llm.Response) []llm.Chunk {
	chunks := make([]llm.Chunk, 0, 2+len(r.ToolCalls))
	if r.Content != "" {
		chunks = append(chunks, llm.Chunk{Text: r.Content})
	}
	for i, c := range r.ToolCalls {
		chunks = append(chunks, llm.Chunk{ToolCall: &llm.ToolCallDelta{Index: i, ID: c.ID, Name: c.Name,
			Arguments: string(c.Arguments), Signature: c.Signature}})
	}
	u := r.Usage
	return append(chunks, llm.Chunk{Usage: &u, Model: r.Model, FinishReason: r.FinishReason})
}

// beforeModel serves the call from the log when the log holds it, and
// otherwise commits what is queued before the model is asked, or within
// commitEvery when the last commit is more recent: a crash during a
// model call loses no turn before it (unless those turns were all faster
// than commitEvery), and a watcher sees the turn's events while the
// model works.
func (j *runJournal) beforeModel(ctx context.Context, req *llm.Request) (n int, digest string, resp *llm.Response, err error, served bool) {
	n, digest = j.n, j.digest(req)
	j.n++
	if j.log != nil && !j.live {
		if n < len(j.log.ModelCalls) {
			rec := &j.log.ModelCalls[n]
			if rec.Digest != digest {
				what := fmt.Sprintf("model call %d asks something else than the recorded one (the prompts, the tools or an earlier result differ)", n+1)
				if err := j.diverged(Difference{Turn: j.r.st.Turn, What: what}); j.w != nil {
					return n, digest, nil, err, true // a resume must not build on a different past
				}
			}
			resp, err = replayModel(rec)
			j.servedCalls = append(j.servedCalls, servedCall{index: len(j.r.trace.calls), rec: rec})
			return n, digest, resp, err, true
		}
		if j.w == nil {
			err := j.diverged(Difference{Turn: j.r.st.Turn, What: fmt.Sprintf("the replay makes model call %d; the recording has %d", n+1, len(j.log.ModelCalls))})
			return n, digest, nil, err, true
		}
		if err := j.r.abortAfterLog(); err != nil {
			return n, digest, nil, err, true
		}
		j.live = true
	}
	if j.w != nil {
		if err := j.w.CommitWithin(ctx, commitEvery); err != nil {
			return n, digest, nil, err, true
		}
	}
	return n, digest, nil, nil, false
}

func (j *runJournal) afterModel(n int, digest string, resp *llm.Response, err error, start time.Time) {
	r := j.r
	if err != nil && interrupted(r.ctx) {
		return // cut short: a resume makes the call again
	}
	rec := runlog.ModelCall{N: n, Digest: digest, Response: journal.NewResponse(resp), Attempts: int(r.attempts), DurationMS: ms(time.Since(start))}
	if rec.Response != nil {
		for i, c := range rec.Response.ToolCalls {
			if r.s.agent.private(c.Name) { // the model's input to a private tool stays out of the log
				rec.Response.ToolCalls[i].Arguments = string(policy.PrivateJSON([]byte(c.Arguments)))
			}
		}
	}
	if r.a != r.s.agent {
		rec.Agent = r.a.spec.AgentName
	}
	if err != nil {
		var ae *llm.APIError
		rec.Error = &runlog.ModelError{Kind: llm.KindOf(err).String(), Message: err.Error()}
		if errors.As(err, &ae) {
			rec.Error.Status, rec.Error.Message = ae.Status, ae.Message
		}
	}
	j.add(store.KindModelCall, r.st.Turn, "", rec)
}

// replayModel returns the recorded answer. The response is decoded for
// this call alone, so the loop may keep it.
func replayModel(m *runlog.ModelCall) (*llm.Response, error) {
	if m.Error != nil {
		kind, _ := llm.ParseKind(m.Error.Kind)
		return nil, &llm.APIError{Kind: kind, Status: m.Error.Status, Message: m.Error.Message}
	}
	if m.Response == nil {
		return nil, fmt.Errorf("%w: model call %d has neither a response nor an error", ErrDiverged, m.N+1)
	}
	return m.Response.LLM(), nil
}

// digest identifies what a model call asks: the transcript, the tools
// and the output schema. The transcript is hashed as it grows,
// so a turn hashes only its new messages.
func (j *runJournal) digest(req *llm.Request) string {
	if j.h == nil || len(req.Messages) < j.hashed || (len(req.Messages) > 0 && req.Messages[0].Content != j.first) {
		j.h, j.hashed = sha256.New(), 0 // a handoff rewrote the system prompt
		if len(req.Messages) > 0 {
			j.first = req.Messages[0].Content
		}
	}
	a := j.r.s.agent
	for _, m := range req.Messages[j.hashed:] {
		hashMessage(j.h, &m, a.redact, a.private)
	}
	j.hashed = len(req.Messages)
	sum := j.h.Sum(nil)
	tail := sha256.New()
	tail.Write(sum) // not the model: a resume may give the rest of the run another
	for _, t := range req.Tools {
		writeField(tail, t.Name)
		writeField(tail, t.Description)
		writeField(tail, string(t.Parameters))
	}
	writeField(tail, string(req.ResponseSchema))
	return hex.EncodeToString(tail.Sum(nil)[:16])
}

// hashMessage hashes a message as the log keeps it, secrets redacted and
// private tools' inputs and outputs as their digests: a replay rebuilds
// the transcript from the log, and must hash the same.
func hashMessage(h hash.Hash, m *llm.Message, red *policy.Redactor, private func(string) bool) {
	writeField(h, m.Role.String())
	content := m.Content
	if m.Role == llm.RoleTool && private(m.Name) {
		content = policy.Private(content)
	}
	writeField(h, red.String(content))
	for _, c := range m.ToolCalls {
		writeField(h, c.ID)
		writeField(h, c.Name)
		args := c.Arguments
		if private(c.Name) {
			args = policy.PrivateJSON(args)
		}
		writeField(h, string(red.Bytes(args)))
	}
	writeField(h, m.ToolCallID)
	writeField(h, m.Name)
	for _, im := range m.Images() {
		sum := sha256.Sum256(im.Data)
		writeField(h, im.URL+"\x00"+im.MIMEType+"\x00"+hex.EncodeToString(sum[:]))
	}
}

// writeField writes s with its length, so that fields cannot run into
// each other.
func writeField(h hash.Hash, s string) {
	var n [20]byte
	h.Write(strconv.AppendInt(n[:0], int64(len(s)), 10))
	h.Write([]byte{':'})
	h.Write([]byte(s))
}

// journalTools is the tool middleware of the run log: inside the user's
// middleware (policy), outside retries, so that it sees a call once
// whatever its attempts.
func journalTools(next tool.Handler) tool.Handler {
	return func(ctx context.Context, call *tool.Call) (tool.Output, error) {
		j := journalOf(ctx)
		if j == nil {
			return next(ctx, call)
		}
		return j.tool(ctx, call, next)
	}
}

// tool runs one call the durable way.
func (j *runJournal) tool(ctx context.Context, call *tool.Call, next tool.Handler) (tool.Output, error) {
	key, class := call.Key(), call.Class()
	intent := false
	if l := j.log; l != nil {
		if res, ok := l.Results[key]; ok {
			if j.liveMode && class.Retryable() && !j.r.s.agent.private(call.Name) {
				return j.compareLive(ctx, call, res, next) // a private call's arguments are a digest: not run again
			}
			j.served(call.Turn, res)
			return res.Result()
		}
		if res, ok := j.supplied[key]; ok {
			return j.record(ctx, call, class, res)
		}
		if in, ok := l.Intents[key]; ok && class == tool.NonIdempotent && !j.neverRan(call.Turn) {
			if err := j.r.abortAfterLog(); err != nil {
				return tool.Output{}, err
			}
			switch {
			case j.deny[key]:
				if err := j.audit(ctx, call, "deny", "not sent again: its outcome is unknown"); err != nil {
					return tool.Output{}, err
				}
				return j.unknownOutcome(call, time.Now())
			case !j.approve[key] && !in.Deduplicates:
				return tool.Output{}, &ApprovalError{CallID: call.ID, Tool: call.Name, Key: key, Arguments: call.Arguments}
			case j.approve[key]:
				if err := j.audit(ctx, call, "approve", "sent again under its idempotency key, though its outcome is unknown"); err != nil {
					return tool.Output{}, err
				}
			}
			intent = true // approved, or the tool deduplicates: sent again with the same key
		} else if call.Turn < j.quiet {
			// A call of a turn the log holds in full, without a result of
			// its own: the original run answered it from its cache.
			if res, ok := l.Latest(call.Name, string(call.Arguments)); ok {
				return res.Result()
			}
		}
		if err := j.r.abortAfterLog(); err != nil {
			return tool.Output{}, err
		}
		if j.w == nil && !(j.liveMode && class.Retryable()) {
			err := j.diverged(Difference{Turn: call.Turn, Step: call.Index + 1, Tool: call.Name,
				What: "the replay makes a tool call the recording does not have"})
			return tool.Output{}, err
		}
	}
	if t, caller := call.Tool.(callerTool); caller && j.w != nil {
		return j.handBack(ctx, call, t)
	}
	if class == tool.NonIdempotent && !intent && j.w != nil {
		in := runlog.Intent{CallID: call.ID, Tool: call.Name, Arguments: string(j.r.hideArgs(call.Name, call.Arguments)), Idempotency: class, Deduplicates: call.Deduplicates(ctx)}
		if err := j.commit(ctx, journal.Record(store.KindToolIntent, call.Turn, key, in)); err != nil {
			return tool.Output{}, err // not run: it could not be made safe to run
		}
	}
	if j.out != nil && j.handsOut(call) {
		return tool.Output{}, j.out.add(ctx, j.r.a, call)
	}
	start := time.Now()
	out, err := next(ctx, call)
	rec := journal.NewToolResult(call, out, err, start)
	if j.r.s.agent.private(call.Name) {
		hideResult(&rec)
	}
	if err != nil && interrupted(j.r.ctx) {
		// Cut short: a resume runs it again, or, for a call that cannot
		// be repeated blindly, finds its intent and asks.
		return out, err
	}
	if class == tool.NonIdempotent {
		if cerr := j.commit(ctx, journal.Record(store.KindToolResult, call.Turn, key, rec)); cerr != nil {
			return out, errors.Join(err, cerr)
		}
	} else {
		j.add(store.KindToolResult, call.Turn, key, rec)
	}
	return out, err
}

// hideResult puts digests in place of a private tool's arguments and
// result in its record.
func hideResult(rec *runlog.ToolResult) {
	if rec.Observation == "" && rec.Output != nil {
		rec.Observation = *rec.Output // what the model saw: its digest is what a replay shows it
	}
	rec.Arguments, rec.Observation = policy.Private(rec.Arguments), policy.Private(rec.Observation)
	if rec.Output != nil {
		o := string(policy.PrivateJSON([]byte(*rec.Output)))
		rec.Output = &o
	}
}

// handsOut reports whether a dispatching run hands call out: not a
// sub-agent's call (the sub-agent runs here, as a run of its own), nor a
// call of an agent the run was handed to (the executor builds the run's
// first agent, whose tools they are not): those run here.
func (j *runJournal) handsOut(call *tool.Call) bool {
	_, sub := call.Tool.(subTool)
	return !sub && j.r.a == j.r.s.agent
}

// neverRan reports whether the calls of turn were never handed to the
// executor of a dispatching run (RanThrough): their intents were
// committed by a planning attempt whose hand-out never reached it, so
// their outcome is not unknown, and they are handed out again.
func (j *runJournal) neverRan(turn int) bool {
	e := j.r.s.cfg.extra
	return j.out != nil && e != nil && e.ranSet && turn > e.ranThrough
}

// record writes the result of a call the run handed out, which its
// executor ran (WithResults), and answers the call with it.
func (j *runJournal) record(ctx context.Context, call *tool.Call, class tool.Idempotency, res runlog.ToolResult) (tool.Output, error) {
	res.CallID, res.Tool, res.Arguments = call.ID, call.Name, string(call.Arguments)
	if class == tool.NonIdempotent {
		if err := j.commit(ctx, journal.Record(store.KindToolResult, call.Turn, call.Key(), res)); err != nil {
			return tool.Output{}, err
		}
	} else {
		j.add(store.KindToolResult, call.Turn, call.Key(), res)
	}
	j.served(call.Turn, &res)
	return res.Result()
}

// audit records a person's decision on a call of unknown outcome, as
// theirs.
func (j *runJournal) audit(ctx context.Context, call *tool.Call, decision, reason string) error {
	by, _ := j.r.decider(call.Key())
	return j.r.reportAs(ctx, "tool:"+call.Name, call.ID, by, "unknown_outcome", decision, reason)
}

// unknownOutcome answers a denied call: it may or may not have taken
// effect, and it is not sent again. The answer is recorded as its result.
func (j *runJournal) unknownOutcome(call *tool.Call, start time.Time) (tool.Output, error) {
	d := &tool.ErrorDetails{Type: "unknown_outcome", Recoverable: false,
		Message: fmt.Sprintf("the call %s (%s) was sent before the run stopped, and whether it took effect is unknown; "+
			"it was not sent again", call.ID, call.Name)}
	if reason := j.r.s.cfg.denyReason(); reason != "" {
		d.Message += " (" + reason + ")"
	}
	rec := journal.NewToolResult(call, tool.Output{}, d, start)
	if err := j.commit(context.Background(), journal.Record(store.KindToolResult, call.Turn, call.Key(), rec)); err != nil {
		return tool.Output{}, err
	}
	return tool.Output{}, d
}

// compareLive runs a recorded safe or idempotent call again (replay
// --tools live) and reports an output that differs.
func (j *runJournal) compareLive(ctx context.Context, call *tool.Call, rec *runlog.ToolResult, next tool.Handler) (tool.Output, error) {
	out, err := next(ctx, call)
	was, wasErr := rec.Result()
	now, was2 := string(out.JSON), string(was.JSON)
	if err != nil {
		now = "error: " + err.Error()
	}
	if wasErr != nil {
		was2 = "error: " + wasErr.Error()
	}
	if now != was2 {
		j.diverged(Difference{Turn: call.Turn, Step: call.Index + 1, Tool: call.Name, What: "the tool's result differs",
			Recorded: was2, Replayed: now})
	}
	return out, err
}

// How a resumed session ends after its log (run.afterLog).
const (
	afterAbort = iota + 1
	afterTimeout
)

var afterLogEnds = [...]error{afterAbort: ErrAborted, afterTimeout: ErrTimeout}

// abortAfterLog ends a resumed run aborted (or out of time) before it
// ran, once its log has nothing more to serve: ErrAborted (ErrTimeout),
// nil while it has.
func (r *run) abortAfterLog() error {
	err := afterLogEnds[r.afterLog]
	if err == nil {
		return nil
	}
	r.s.cancel(err)
	return err
}

// interrupted says the run was interrupted (Session.Interrupt): what its
// calls cut short did not happen, and is not recorded.
func interrupted(ctx context.Context) bool { return errors.Is(context.Cause(ctx), ErrInterrupted) }
