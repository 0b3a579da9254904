package server

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/agentry/agentry/agent"
)

// completion is one chat completion as OpenAI's API writes it.
type completion struct {
	id, model string
	created   int64
	usage     bool // stream_options.include_usage
}

// finishReason is OpenAI's word for how the run ended.
func finishReason(res *agent.Result) string {
	switch {
	case len(handedBack(res)) > 0:
		return "tool_calls"
	case res.TerminateReason == agent.ReasonCompleted:
		return "stop"
	case res.Outcome == agent.OutcomePartial:
		return "length" // a budget, the turns or the time ran out
	case res.Error != nil && strings.HasPrefix(res.Error.Code, "policy"):
		return "content_filter"
	}
	return "stop"
}

// answerText is the run's answer as message content: its text, or its
// structured output as JSON.
func answerText(res *agent.Result) string {
	switch v := res.Result.(type) {
	case nil:
		return ""
	case string:
		return v
	}
	b, _ := json.Marshal(res.Result)
	return string(b)
}

func usageOf(res *agent.Result) map[string]int {
	u := res.TokenUsage
	return map[string]int{"prompt_tokens": u.PromptTokens, "completion_tokens": u.CompletionTokens, "total_tokens": u.TotalTokens}
}

// failure is what the caller is told of a run that gave no answer: one
// that ended in error (not a budget's end, which answers what it has),
// or one that waits for a person's approval. status 0: it answered.
func failure(res *agent.Result) (status int, code, message string) {
	switch {
	case len(handedBack(res)) > 0:
		return 0, "", "" // its answer is the calls it hands back
	case res.TerminateReason == agent.ReasonAwaitingApproval:
		return http.StatusConflict, agent.CodeAwaitingApproval, fmt.Sprintf("run %s waits for a person's approval of a tool call: "+
			"approve or deny it in the viewer, or with POST /v1/runs/%s/resume", res.ID, res.ID)
	case res.Error != nil && res.Outcome == agent.OutcomeError:
		return http.StatusInternalServerError, res.Error.Code, res.Error.Message // redacted with the Result
	}
	return 0, "", ""
}

// answer writes the run's Result as a chat.completion object, or why it
// has none as OpenAI's error.
func (c *completion) answer(w http.ResponseWriter, res *agent.Result) {
	if status, code, msg := failure(res); status != 0 {
		writeOpenAIError(w, status, code, msg)
		return
	}
	msg := map[string]any{"role": "assistant", "content": answerText(res)}
	if calls := handedBack(res); len(calls) > 0 {
		msg["content"], msg["tool_calls"] = nil, toolCalls(calls, false)
	}
	writeJSON(w, http.StatusOK, map[string]any{
		"id": c.id, "object": "chat.completion", "created": c.created, "model": c.model,
		"choices": []map[string]any{{"index": 0, "message": msg, "finish_reason": finishReason(res)}},
		"usage":   usageOf(res),
	})
}

// toolCalls are the calls handed back as a message's tool_calls, each
// its key as its id (numbered, for a stream's deltas).
func toolCalls(calls []agent.ApprovalError, indexed bool) []map[string]any {
	out := make([]map[string]any, len(calls))
	for i, c := range calls {
		out[i] = map[string]any{"id": c.Key, "type": "function", "function": map[string]any{"name": c.Tool, "arguments": string(c.Arguments)}}
		if indexed {
			out[i]["index"] = i
		}
	}
	return out
}

// stream writes the run as chat.completion.chunk events: the role, the
// text as the model streams it, the rest of the answer when the run
// ends (all of it, when the run did not stream), the finish reason, the
// usage when asked for, and "data: [DONE]".
func (c *completion) stream(ctx context.Context, w http.ResponseWriter, text *chunks, done <-chan any) {
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
	rc := http.NewResponseController(w)
	send := func(v any) bool {
		b, ok := v.([]byte) // the last line, as it is
		if !ok {
			b, _ = json.Marshal(v)
		}
		fmt.Fprintf(w, "data: %s\n\n", b)
		rc.SetWriteDeadline(time.Now().Add(writeTimeout))
		return rc.Flush() == nil
	}
	var sent strings.Builder
	delta := func(d map[string]any) bool {
		return send(c.chunk([]map[string]any{{"index": 0, "delta": d, "finish_reason": nil}}))
	}
	if !delta(map[string]any{"role": "assistant", "content": ""}) {
		return
	}
	for {
		select {
		case <-ctx.Done():
			return // the run goes on
		case <-text.ready:
			if !c.send(delta, text.take(), &sent) {
				return
			}
		case v := <-done:
			res := v.(*agent.Result)
			c.send(delta, text.take(), &sent)
			c.finish(send, res, sent.String())
			return
		}
	}
}

// send writes pieces as deltas: the answer's as content (kept in sent),
// a thought's as reasoning_content, which clients that know it show
// apart and the others ignore.
func (c *completion) send(delta func(map[string]any) bool, pieces []piece, sent *strings.Builder) bool {
	for _, p := range pieces {
		key := "content"
		if p.reasoning {
			key = "reasoning_content"
		} else {
			sent.WriteString(p.text)
		}
		if !delta(map[string]any{key: p.text}) {
			return false
		}
	}
	return true
}

// finish writes the end of a streamed completion.
func (c *completion) finish(send func(any) bool, res *agent.Result, sent string) {
	if status, code, msg := failure(res); status != 0 {
		send(map[string]any{"error": map[string]any{"message": msg, "type": openAIType(status), "param": nil, "code": code}})
		send0(send)
		return
	}
	if rest, ok := strings.CutPrefix(answerText(res), sent); ok && rest != "" {
		send(c.chunk([]map[string]any{{"index": 0, "delta": map[string]any{"content": rest}, "finish_reason": nil}}))
	}
	if calls := handedBack(res); len(calls) > 0 {
		send(c.chunk([]map[string]any{{"index": 0, "delta": map[string]any{"tool_calls": toolCalls(calls, true)}, "finish_reason": nil}}))
	}
	send(c.chunk([]map[string]any{{"index": 0, "delta": map[string]any{}, "finish_reason": finishReason(res)}}))
	if c.usage {
		ch := c.chunk([]map[string]any{})
		ch["usage"] = usageOf(res)
		send(ch)
	}
	send0(send)
}

// send0 ends a stream as OpenAI's does: "data: [DONE]".
func send0(send func(any) bool) { send([]byte("[DONE]")) }

func (c *completion) chunk(choices []map[string]any) map[string]any {
	return map[string]any{"id": c.id, "object": "chat.completion.chunk", "created": c.created, "model": c.model, "choices": choices}
}
