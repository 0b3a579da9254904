package agent

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/agentry/agentry/event"
	"github.com/agentry/agentry/llm"
	"github.com/agentry/agentry/spec"
)

// A transcript is compacted when its estimate passes fitAt of the window
// left for it, down to fitTo: room for a few turns before the next one.
const (
	fitAt = 0.85
	fitTo = 0.60
)

// dropped is what an observation compaction dropped says instead.
const dropped = "[dropped to fit the context window: %d bytes]"

// tokens estimates a request's prompt tokens, about four bytes a token,
// as a router does (llm.NeedsOf).
func tokens(msgs []llm.Message, tools []llm.ToolSpec) int {
	n := 0
	for i := range msgs {
		n += messageBytes(&msgs[i])
	}
	for i := range tools {
		n += len(tools[i].Description) + len(tools[i].Parameters) + len(tools[i].Name)
	}
	return n/4 + 1
}

func messageBytes(m *llm.Message) int {
	n := len(m.Content) + 16 // a message's own framing
	for _, c := range m.ToolCalls {
		n += len(c.Arguments) + len(c.Name) + len(c.ID)
	}
	return n
}

// room is the part of the window the prompt may take: the rest is for the
// reply.
func (r *run) room() int {
	w := int(r.limits.window)
	reply := r.a.spec.MaxOutputTokens
	if reply <= 0 || reply > w/2 {
		reply = w / 8
	}
	return w - reply
}

// fit compacts the transcript when it nears the window (force: the
// provider said it does not fit). It is a no-op when the window is
// unknown or compaction is off; it fails with ErrContextTooLong when
// compaction cannot make room.
func (r *run) fit(ctx context.Context, force bool) error {
	if r.limits.window <= 0 || r.a.compaction == spec.CompactOff {
		return nil
	}
	room := r.room()
	before := tokens(r.st.Messages, r.req.Tools)
	if !force && before <= int(float64(room)*fitAt) {
		return nil
	}
	target := int(float64(room) * fitTo)
	changed, err := 0, error(nil)
	if hl := r.historyLen(); hl > 0 {
		// A conversation's history is the oldest of what the model is
		// sent: it is compacted first, and what compaction makes of it
		// (a summary) is what the next run starts from, made once.
		at := r.historyAt()
		changed, _ = r.compact(ctx, at, at+hl, target, before, true)
	}
	if est := tokens(r.st.Messages, r.req.Tools); est > target {
		from, to := span(r.st.Messages, r.a.keepTurns, r.lead())
		n, cerr := r.compact(ctx, from, to, target, est, false)
		changed, err = changed+n, cerr
	}
	if err != nil && (changed == 0 || !errors.Is(err, ErrContextTooLong)) {
		return err
	}
	after := tokens(r.st.Messages, r.req.Tools)
	if changed > 0 {
		r.warn("the transcript was compacted (%s) to fit a window of %d tokens: %d messages changed, about %d tokens to %d",
			r.a.compaction, r.limits.window, changed, before, after)
	}
	if changed > 0 && r.s.bus.Active() {
		r.emit(event.Event{Type: event.Compaction, Data: map[string]any{"strategy": r.a.compaction,
			"tokens_before": before, "tokens_after": after, "window": int(r.limits.window), "messages_changed": changed}})
	}
	if after > room {
		return withDetails(fmt.Errorf("%w: about %d tokens left after compaction, %d fit (window %d)", ErrContextTooLong, after, room, r.limits.window),
			map[string]any{"tokens": after, "window": int(r.limits.window)})
	}
	return nil
}

// compact compacts the messages from..to of the transcript by the
// agent's strategy, a summary falling back to dropping what is oldest
// when the model cannot write one; history says the range is the
// conversation's history, whose length it keeps.
func (r *run) compact(ctx context.Context, from, to, target, est int, history bool) (int, error) {
	n := len(r.st.Messages)
	var changed int
	var err error
	if r.a.compaction == spec.CompactSummarize {
		changed, err = r.summarize(ctx, from, to)
	}
	if r.a.compaction == spec.CompactDropOldest || err != nil && !errors.Is(err, ErrContextTooLong) {
		changed, err = r.dropOldest(from, to, target, est), nil
	}
	if history {
		r.notes.historyLen += len(r.st.Messages) - n
	}
	return changed, err
}

// historyLen is how many messages of the transcript are the
// conversation's history.
func (r *run) historyLen() int {
	if r.notes == nil {
		return 0
	}
	return r.notes.historyLen
}

// lead is how many messages open the transcript: the system prompt, the
// template's few-shot turns, the spec's history and the task, which
// compaction never changes. It renders them again (compaction is rare),
// and is -1 when the transcript does not start with them.
func (r *run) lead() int {
	init, err := r.s.agent.initialMessages(r.st.Input)
	n := len(init)
	if err != nil || n == 0 {
		return -1
	}
	if msgs := r.st.Messages; len(msgs) > 0 && msgs[0].Role == llm.RoleSystem && init[0].Role != llm.RoleSystem {
		n++ // a handoff gave the transcript a system prompt
	}
	n += r.historyLen() // a conversation's history, before the task
	if n > len(r.st.Messages) {
		return -1
	}
	return n
}

// span is the part of the transcript compaction may change: after the
// lead messages (or, when they are not known, the system prompt and the
// first user message), before the last keep turns (a turn starts at an
// assistant message).
func span(msgs []llm.Message, keep, lead int) (from, to int) {
	if lead >= 0 {
		from = lead
	} else {
		for from < len(msgs) && msgs[from].Role == llm.RoleSystem {
			from++
		}
		for from < len(msgs) && msgs[from].Role != llm.RoleUser {
			from++
		}
		from++ // the task
	}
	to = len(msgs)
	for seen := 0; to > from; {
		to--
		if msgs[to].Role == llm.RoleAssistant {
			if seen++; seen == keep {
				break
			}
		}
	}
	return min(from, len(msgs)), max(to, min(from, len(msgs)))
}

// observation says a message is a tool's observation: a tool message, or
// a ReAct "Observation:" line.
func observation(m *llm.Message) bool {
	return m.Role == llm.RoleTool || m.Role == llm.RoleUser && strings.HasPrefix(m.Content, "Observation: ")
}

// dropOldest replaces the oldest observations of msgs[from:to] with a
// note until the transcript's estimate is at most target, then, if it
// must, drops the oldest whole turns (an assistant message and the
// results of its calls). It returns how many messages it changed or
// dropped.
func (r *run) dropOldest(from, to, target, est int) int {
	msgs := r.st.Messages
	changed := 0
	for i := from; i < to && est > target; i++ {
		m := &msgs[i]
		if !observation(m) || strings.HasPrefix(m.Content, "[dropped") {
			continue
		}
		note := fmt.Sprintf(dropped, len(m.Content))
		if m.Role == llm.RoleUser {
			note = "Observation: " + note
		}
		if len(note) >= len(m.Content) {
			continue
		}
		est -= (len(m.Content) - len(note)) / 4
		m.Content = note // the message is the run's: the trace keeps the observation
		changed++
	}
	if est <= target {
		return changed
	}
	cut := from
	for cut < to && est > target {
		end := cut + 1 // a turn: this message and the tool results that answer it
		for end < to && msgs[end].Role == llm.RoleTool {
			end++
		}
		for i := cut; i < end; i++ {
			est -= messageBytes(&msgs[i]) / 4
		}
		cut = end
	}
	if cut > from {
		changed += cut - from
		r.st.Messages = append(msgs[:from:from], msgs[cut:]...) // a new array: the old one may be shared
	}
	return changed
}

// summarize replaces msgs[from:to] with a summary the model writes, in
// one call through the run's provider chain (so the run log records it
// and a resume replays it).
func (r *run) summarize(ctx context.Context, from, to int) (int, error) {
	msgs := r.st.Messages
	if to-from < 2 {
		return 0, fmt.Errorf("%w: nothing older than the last %d turns to summarise", ErrContextTooLong, r.a.keepTurns)
	}
	var b strings.Builder
	for _, m := range msgs[from:to] {
		b.WriteString(m.Role.String())
		if m.Name != "" {
			b.WriteString(" (" + m.Name + ")")
		}
		b.WriteString(": ")
		b.WriteString(m.Content)
		for _, c := range m.ToolCalls {
			b.WriteString("\n  calls " + c.Name + " " + string(c.Arguments))
		}
		b.WriteString("\n")
	}
	req := &llm.Request{Model: r.a.model, Messages: []llm.Message{
		{Role: llm.RoleSystem, Content: "Summarise the conversation below for the assistant who continues it: keep every fact, result, decision and open question it needs; leave out the rest. Reply with the summary only."},
		{Role: llm.RoleUser, Content: b.String()},
	}}
	start := time.Now()
	resp, err := r.s.provider.Generate(ctx, req)
	d := r.since(start, time.Now())
	mc := ModelCall{Turn: r.st.Turn, Provider: r.a.providerName, Model: r.a.model, DurationMS: ms(d), Attempts: 1, Agent: "compaction"}
	if err == nil && resp != nil {
		r.account(resp, &mc)
	} else if err != nil {
		mc.Error = err.Error()
	}
	r.trace.call(&mc, d, r.s.agent)
	if err != nil || resp == nil || strings.TrimSpace(resp.Content) == "" {
		return 0, fmt.Errorf("summarising the older turns: %v", err)
	}
	summary := llm.Message{Role: llm.RoleUser, Content: "Summary of the earlier conversation (" + strconv.Itoa(to-from) + " messages):\n" + resp.Content}
	out := make([]llm.Message, 0, len(msgs)-(to-from)+1)
	r.st.Messages = append(append(append(out, msgs[:from]...), summary), msgs[to:]...)
	return to - from, nil
}

// refit answers a provider's context-length error: the window is at most
// what was sent, the transcript is compacted to fit it, and the call is
// made again, once. What cannot be made to fit ends the run.
func (r *run) refit(ctx context.Context, cause error) (*llm.Response, error) {
	est := tokens(r.st.Messages, r.req.Tools)
	if w := int32(min(est, math.MaxInt32)); r.limits.window <= 0 || w < r.limits.window {
		r.limits.window = w
	}
	if err := r.fit(ctx, true); err != nil {
		return nil, fmt.Errorf("%w (%w)", err, cause)
	}
	r.req.Messages = r.st.Messages
	r.attempts++
	return r.generate(ctx)
}
