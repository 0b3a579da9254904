package pipeline

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/agentry/agentry/agent"
	"github.com/agentry/agentry/llm"
	"github.com/agentry/agentry/policy"
	"github.com/agentry/agentry/runlog"
	"github.com/agentry/agentry/store"
)

// WithConversation makes the run one of the conversation id: each of its
// stages starts from what was said before in it (the history the run was
// given, after the stage's system prompt), and the run's input and
// answer are what the conversation's next run starts from. It needs the
// run store (WithStore), where the conversation lives (made for the
// run's user when it does not exist). One run of a conversation goes at
// a time: a run that would join one whose run goes on fails with an error
// in which errors.Is finds store.ErrBusy.
func WithConversation(id string) RunOption { return func(c *runConfig) { c.conversation = id } }

// readHistory is the history a fresh run of conversation id starts from,
// and the run whose history it is; the conversation is made for the
// run's user when it does not exist.
func (r *runState) readHistory(ctx context.Context, st store.Store, id string) ([]llm.Message, string, error) {
	cs, ok := st.(store.Conversations)
	if !ok {
		return nil, "", fmt.Errorf("%w: WithConversation: the run store (%T) keeps no conversations", ErrInvalid, st)
	}
	user := ""
	if p := policy.PrincipalFrom(ctx); p != nil {
		user = p.UserID
	}
	conv, err := cs.Conversation(ctx, id)
	switch {
	case errors.Is(err, store.ErrNoConversation):
		if err := cs.CreateConversation(ctx, store.Conversation{ID: id, User: user}); err != nil && !errors.Is(err, store.ErrExists) {
			return nil, "", fmt.Errorf("conversation %s: %w", id, err)
		}
		return nil, "", nil
	case err != nil:
		return nil, "", fmt.Errorf("conversation %s: %w", id, err)
	case conv.User != user:
		return nil, "", fmt.Errorf("%w: %s", store.ErrNoConversation, id)
	}
	rec, err := cs.History(ctx, id)
	if err != nil || rec == nil {
		return nil, "", err
	}
	if err := runlog.OpenRecord(r.p.seal, rec.RunID, &rec.Record); err != nil {
		return nil, "", fmt.Errorf("conversation %s: the history of run %s: %w", id, rec.RunID, err)
	}
	var h runlog.History
	if err := json.Unmarshal(rec.Data, &h); err != nil {
		return nil, "", fmt.Errorf("conversation %s: the history of run %s: %w", id, rec.RunID, err)
	}
	return h.Messages, rec.RunID, nil
}

// joined gives the stages the history the run started from.
func (r *runState) joined(conv string, hist []llm.Message) {
	r.conversation, r.history = conv, hist
	if len(hist) > 0 {
		r.sessionOpts = append(r.sessionOpts, agent.WithHistory(hist...))
	}
}

// ownHistory is where the conversation's next run starts: the history
// this run was given, its input as the user's message, its answer.
func (r *runState) ownHistory() runlog.History {
	msgs := append([]llm.Message(nil), r.history...)
	msgs = append(msgs, llm.Message{Role: llm.RoleUser, Content: textOf(runlog.MessageOf(r.env.RawInput))})
	if t := &r.res.Result; t.Result != nil {
		msgs = append(msgs, llm.Message{Role: llm.RoleAssistant, Content: textOf(t.Result)})
	}
	return runlog.History{Messages: msgs}
}

// textOf is v as a message's text: a string as it is, else its JSON.
func textOf(v any) string {
	if s, ok := v.(string); ok {
		return s
	}
	b, _ := json.Marshal(v)
	return string(b)
}
