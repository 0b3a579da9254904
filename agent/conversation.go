package agent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/agentry/agentry/llm"
	"github.com/agentry/agentry/runlog"
	"github.com/agentry/agentry/spec"
	"github.com/agentry/agentry/store"
)

// WithConversation makes the run one of the conversation id: it starts
// from what was said before in it (the earlier runs' tasks, their tool
// calls and results, their answers, as the spec's context.history
// carries them), after the system prompt and the spec's messages and
// before its own task, and what it says is where the next run starts.
// The conversation lives in the run store, which the run needs
// (WithStore, or a Service's StoreRuns); it is made for the run's user
// when it does not exist. One run of a conversation goes at a time: a
// run that would join one whose run goes on, waits for approval or was
// interrupted fails at once with an error in which errors.Is finds
// store.ErrBusy (and errors.As a *store.BusyError naming that run).
func WithConversation(id string) RunOption {
	return func(c *runConfig) { c.more().conversation = id }
}

// WithHistory makes the run start from msgs, what was said before it,
// placed and carried as a conversation's history is (after the system
// prompt and the spec's messages, before the task, as the spec's
// context.history says, compacted first), without joining a
// conversation: for a host that keeps the history itself, as a pipeline
// in a conversation gives its stages the history its run was given. The
// run's start record keeps it, for a resume and a replay.
func WithHistory(msgs ...llm.Message) RunOption {
	return func(c *runConfig) {
		e := c.more()
		e.history, e.historySet = msgs, true // copied into the transcript: the run does not change msgs
	}
}

// conversation is the run's conversation, or "".
func (c *runConfig) conversation() string {
	if c.extra == nil {
		return ""
	}
	return c.extra.conversation
}

// checkConversation checks the conversation options of a run.
func (c *runConfig) checkConversation() error {
	id := c.conversation()
	switch {
	case id == "":
		return nil
	case c.store == nil:
		return fmt.Errorf("%w: WithConversation needs a run store (WithStore): a conversation lives there", ErrConfig)
	case len(id) > 128:
		return fmt.Errorf("%w: WithConversation: the id is over 128 bytes", ErrConfig)
	}
	if _, ok := c.store.(store.Conversations); !ok {
		return fmt.Errorf("%w: WithConversation: the run store (%T) keeps no conversations", ErrConfig, c.store)
	}
	return nil
}

// joinConversation puts the conversation's history into the transcript,
// after the system prompt and the spec's messages: as the store has it
// now, or, for a run that resumes or replays, as it started.
func (r *run) joinConversation(ctx context.Context) error {
	c := &r.s.cfg
	id := c.conversation()
	if id == "" && (c.extra == nil || !c.extra.historySet) {
		return nil
	}
	// A history given (WithHistory, or a resume's start record) is
	// carried as the spec says too; what the start record kept was, and
	// carrying it again leaves it as it is.
	hist, calls, of := carried(c.extra.history, r.a.spec.Context), c.extra.historyCalls, ""
	if !c.extra.historySet {
		var err error
		if hist, calls, of, err = r.readHistory(ctx, id); err != nil {
			return err
		}
		if f := r.a.script(); f != nil && c.provider == nil {
			// A scripted model plays the conversation's script: this run
			// goes on where the runs before it left off, in any process.
			r.s.provider = r.a.sessionChain(f.From(calls), c.store != nil)
		}
	}
	at := r.historyAt()
	msgs := r.st.Messages
	// Room for the run's own messages (a call and a result a turn, an
	// answer): the history is not copied again as they come. Past 256
	// (24 KiB) a run of many turns grows it as any slice grows.
	room := min(2*max(int(r.limits.maxTurns), 1)+1, 256)
	out := make([]llm.Message, 0, len(msgs)+len(hist)+room)
	r.st.Messages = append(append(append(out, msgs[:at]...), hist...), msgs[at:]...)
	n := r.note()
	n.history, n.historyLen, n.historyCalls, n.historyOf = hist, len(hist), calls, of
	// Read from the store, or kept in the start record: redacted when
	// it was written. A host's own (WithHistory) is not.
	n.historyClean = id != ""
	return nil
}

// readHistory is the conversation's history as the run's spec carries
// it, how many model attempts its runs made, and the run whose history
// it is; the conversation is made for the run's user when it does not
// exist, and another user's is not found.
func (r *run) readHistory(ctx context.Context, id string) ([]llm.Message, int, string, error) {
	cs := r.s.cfg.store.(store.Conversations)
	user := r.info.UserID
	conv, err := cs.Conversation(ctx, id)
	switch {
	case errors.Is(err, store.ErrNoConversation):
		err = cs.CreateConversation(ctx, store.Conversation{ID: id, User: user})
		if err != nil && !errors.Is(err, store.ErrExists) { // made meanwhile: the store checks its owner
			return nil, 0, "", fmt.Errorf("conversation %s: %w", id, err)
		}
		return nil, 0, "", nil
	case err != nil:
		return nil, 0, "", fmt.Errorf("conversation %s: %w", id, err)
	case conv.User != user:
		return nil, 0, "", fmt.Errorf("%w: %s", store.ErrNoConversation, id) // another user's is not there
	}
	rec, err := cs.History(ctx, id)
	if err != nil || rec == nil {
		return nil, 0, "", err
	}
	if err := runlog.OpenRecord(r.a.logSeal, rec.RunID, &rec.Record); err != nil {
		return nil, 0, "", fmt.Errorf("conversation %s: the history of run %s: %w", id, rec.RunID, err)
	}
	var h runlog.History
	if err := json.Unmarshal(rec.Data, &h); err != nil {
		return nil, 0, "", fmt.Errorf("conversation %s: the history of run %s: %w", id, rec.RunID, err)
	}
	return carried(h.Messages, r.a.spec.Context), h.Attempts, rec.RunID, nil
}

// historyOf is the run whose history the run read, or "".
func (r *run) historyOf() string {
	if r.notes == nil {
		return ""
	}
	return r.notes.historyOf
}

// rejoin reads the conversation's history again, for a run the store
// refused because another run of the conversation ended after it read
// it (store.ErrStaleHistory): the history it holds goes, the newest
// comes.
func (r *run) rejoin(ctx context.Context) error {
	at, n := r.historyAt(), r.historyLen()
	r.st.Messages = append(r.st.Messages[:at:at], r.st.Messages[at+n:]...)
	return r.joinConversation(ctx)
}

// cleanHistory is where the transcript holds a conversation's history as
// the store gave it, redacted when it was written and not changed since
// (no compaction): what the Result's redaction need not read again.
func (r *run) cleanHistory() [2]int {
	n := r.notes
	if n == nil || !n.historyClean || n.historyLen != len(n.history) || n.historyLen == 0 {
		return [2]int{}
	}
	at := r.historyAt()
	return [2]int{at, at + n.historyLen}
}

// historyAt is where a conversation's history goes in the transcript:
// after the system prompt and the spec's messages.
func (r *run) historyAt() int {
	msgs := r.st.Messages
	at := 0
	for at < len(msgs) && msgs[at].Role == llm.RoleSystem {
		at++
	}
	return min(at+len(r.s.agent.spec.Messages), len(msgs))
}

// ownHistory is what the next run of the conversation starts from: the
// transcript after the system prompt and the spec's messages (the
// history it started from, compacted as it may have been, its task, its
// calls and their results, its answer).
func (r *run) ownHistory() []llm.Message {
	return r.st.Messages[r.historyAt():]
}

// carried is what a run carries of msgs, as its spec's context.history
// says: without tool calls and results when tools is false (an answer
// that came with calls keeps its text), at most the newest max messages,
// never starting inside a call's results.
func carried(msgs []llm.Message, cx *spec.Context) []llm.Message {
	if cx == nil || cx.History == nil || len(msgs) == 0 {
		return msgs
	}
	h := cx.History
	if h.Tools != nil && !*h.Tools {
		out := make([]llm.Message, 0, len(msgs))
		for _, m := range msgs {
			switch {
			case m.Role == llm.RoleTool:
			case len(m.ToolCalls) > 0 && m.Content == "":
			case len(m.ToolCalls) > 0:
				m.ToolCalls = nil
				out = append(out, m)
			default:
				out = append(out, m)
			}
		}
		msgs = out
	}
	if n := h.MaxMessages; n > 0 && len(msgs) > n {
		from := len(msgs) - n
		for from < len(msgs) && msgs[from].Role == llm.RoleTool {
			from++ // a result without its call: the call was cut
		}
		msgs = slices.Clone(msgs[from:])
	}
	return msgs
}

// MessageInput is the input of a run whose task is a person's message
// (a chat's): the message as the agent's one input key; as the input,
// when it is a JSON object and the agent takes several keys or none;
// otherwise as "task". An agent of several keys needs a JSON object.
func (a *Agent) MessageInput(text string) (map[string]any, error) {
	keys := a.spec.InputKeys
	var obj map[string]any
	switch {
	case len(keys) == 1:
		return map[string]any{keys[0]: text}, nil
	case json.Unmarshal([]byte(text), &obj) == nil && obj != nil:
		return obj, nil
	case len(keys) > 1:
		return nil, fmt.Errorf("%w: agent %s takes %s: send them as a JSON object", ErrInvalidInput, a.spec.AgentName, strings.Join(keys, ", "))
	}
	return map[string]any{"task": text}, nil
}
