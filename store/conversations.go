package store

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// Conversation is a series of runs in which each run sees what was said
// before (a thread, in other runtimes' words). Its runs are the runs
// created with its id (Run.Conversation), in the order they were
// created; one of them goes at a time.
type Conversation struct {
	ID string
	// User is its owner: the user it was created for ("" is the local
	// operator's).
	User string
	// Agent is the agent (NAME@VERSION) of its latest run.
	Agent string
	// ForkedFrom and ForkedAt say where a fork began: the conversation
	// and the run of it whose history it starts from.
	ForkedFrom, ForkedAt string
	// Runs is how many runs it has.
	Runs      int
	CreatedAt time.Time
	UpdatedAt time.Time
}

// ConversationFilter selects conversations for ListConversations.
type ConversationFilter struct {
	// User selects one user's conversations ("": everyone's).
	User string
	// Cursor is the id of the last conversation of the page before: the
	// ones that follow it, most recently updated first.
	Cursor string
	// Limit caps the number (most recently updated first); 0 means 100.
	Limit int
}

// Conversations is what a store that keeps conversations can do; the
// SQL backends do. A run joins one by being created with its id
// (Run.Conversation): the store refuses it with a *BusyError while
// another run of the conversation goes on or waits for approval.
type Conversations interface {
	// CreateConversation adds c (ErrExists for an id taken).
	CreateConversation(ctx context.Context, c Conversation) error
	// Conversation returns the conversation id, or ErrNoConversation.
	Conversation(ctx context.Context, id string) (Conversation, error)
	// ListConversations returns conversations matching f, most recently
	// updated first.
	ListConversations(ctx context.Context, f ConversationFilter) ([]Conversation, error)
	// History returns what the next run of the conversation starts
	// from: the newest KindHistory record of its runs, or, before it has
	// one, the record a fork began with (of the run it was forked at);
	// nil when it has none yet.
	History(ctx context.Context, id string) (*RunRecord, error)
	// Fork creates c as a fork of the conversation from at its run at:
	// it starts from that run's history (its KindHistory record, copied:
	// the fork keeps it when the original is deleted). c's ForkedFrom and
	// ForkedAt are set from from and at.
	Fork(ctx context.Context, from, at string, c Conversation) error
	// DeleteConversation deletes the conversation, its runs, their
	// sub-runs and all their logs, and returns the ids of the runs it
	// deleted. The audit log says so in the same transaction, with no
	// content: the conversation, how many runs, and by (who deleted it).
	// A conversation whose run goes on or waits for approval is not
	// deleted: ErrBusy.
	DeleteConversation(ctx context.Context, id, by string) ([]string, error)
}

// RunRecord is a record with the run whose log it is of.
type RunRecord struct {
	RunID string
	Record
}

// KindHistory is a conversation run's history as it ended: the messages
// the next run of its conversation starts from.
const KindHistory Kind = "history"

// Errors of conversations, matched with errors.Is.
var (
	ErrNoConversation = errors.New("store: conversation not found")
	// ErrStaleHistory is a run that read its conversation's history
	// before another run of it ended: it reads the history again.
	ErrStaleHistory = errors.New("store: the conversation went on since its history was read")
	// ErrBusy is matched by a *BusyError.
	ErrBusy = errors.New("store: the conversation has a run going")
)

// BusyError says which run holds a conversation: one that goes on, waits
// for approval, or was interrupted (until it is resumed or aborted).
type BusyError struct {
	Conversation string
	RunID        string
	Status       Status
}

func (e *BusyError) Error() string {
	return fmt.Sprintf("store: conversation %s has run %s %s: one run of a conversation goes at a time", e.Conversation, e.RunID, e.Status)
}

// Is makes errors.Is(err, ErrBusy) true.
func (e *BusyError) Is(target error) bool { return target == ErrBusy }
