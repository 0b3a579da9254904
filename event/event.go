// Package event carries what a run does, as it happens, to any number of
// subscribers: Go callbacks, channels, iterators, JSON lines, slog.
package event

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"iter"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"
)

// Type names what happened.
type Type string

// The event types, in the order a run emits them.
const (
	RunStart       Type = "run_start"
	TurnStart      Type = "turn_start"
	Thinking       Type = "thinking"
	ContentChunk   Type = "content_chunk"
	ToolCallStart  Type = "tool_call_start"
	ToolCallEnd    Type = "tool_call_end"
	PolicyDecision Type = "policy_decision"
	Retry          Type = "retry"
	TurnEnd        Type = "turn_end"
	Error          Type = "error"
	RunEnd         Type = "run_end"
	// AgentStarted and AgentCompleted frame each stage of a pipeline;
	// Data holds the stage, hop, status (outcome) and duration_ms.
	AgentStarted   Type = "agent_started"
	AgentCompleted Type = "agent_completed"
)

// Event is one thing that happened in a run. Type, RunID, AgentName, Turn
// and Time are always set; the rest depends on the type.
type Event struct {
	Type      Type      `json:"type"`
	RunID     string    `json:"run_id"`
	AgentName string    `json:"agent_name"`
	Turn      int       `json:"turn"`
	Time      time.Time `json:"time"`
	// Seq orders the events of a bus: 1, 2, 3, ...
	Seq uint64 `json:"seq"`
	// ParentRunID is set on the events of a sub-agent's run.
	ParentRunID string `json:"parent_run_id,omitempty"`
	// Content is the text of thinking, content_chunk and run_end events.
	Content string `json:"content,omitempty"`
	// Tool is set on tool_call_start and tool_call_end.
	Tool *ToolCall `json:"tool,omitempty"`
	// Attempt is the failed attempt of a retry event (1 for the first).
	Attempt int `json:"attempt,omitempty"`
	// WaitMS is how long a retry waits.
	WaitMS int64 `json:"wait_ms,omitempty"`
	// Error is set on error and retry events, and on run_end of a failed run.
	Error *ErrorInfo `json:"error,omitempty"`
	// Data holds type-specific details (usage, terminate reason, ...).
	Data map[string]any `json:"data,omitempty"`
}

// ToolCall describes a tool call on tool_call_start and tool_call_end.
type ToolCall struct {
	ID        string          `json:"id"`
	Name      string          `json:"name"`
	Arguments json.RawMessage `json:"arguments,omitempty"`
	// Output, Status ("success" or "error"), Error and DurationMS are set
	// on tool_call_end.
	Output     json.RawMessage `json:"output,omitempty"`
	Status     string          `json:"status,omitempty"`
	Error      string          `json:"error,omitempty"`
	DurationMS float64         `json:"duration_ms,omitempty"`
	Attempts   int             `json:"attempts,omitempty"`
}

// ErrorInfo is an error as events carry it.
type ErrorInfo struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

// Bus delivers events to subscribers synchronously and in one total
// order, even when published from several goroutines. Publishing when
// nobody listens costs an atomic load. A subscriber must not publish to
// the bus it listens to. The zero Bus is ready to use.
type Bus struct {
	parent *Bus
	active atomic.Int32
	mu     sync.Mutex
	seq    uint64
	subs   []*subscriber
}

type subscriber struct {
	fn      func(Event)
	dropped bool
}

// NewBus returns a bus that also forwards every event to parent (which
// may be nil): a session's bus forwards to its service's.
func NewBus(parent *Bus) *Bus { return &Bus{parent: parent} }

// Active reports whether anyone listens, here or on a parent.
func (b *Bus) Active() bool {
	for ; b != nil; b = b.parent {
		if b.active.Load() > 0 {
			return true
		}
	}
	return false
}

// Publish delivers e to every subscriber, in subscription order, then to
// the parent bus. It sets e.Seq.
func (b *Bus) Publish(e Event) {
	if b == nil {
		return
	}
	if b.active.Load() > 0 {
		b.mu.Lock()
		b.seq++
		e.Seq = b.seq
		for i := 0; i < len(b.subs); i++ {
			if !deliver(b.subs[i], e) {
				// A subscriber that panicked is dropped, so that a broken
				// listener can neither crash nor stall the run.
				b.subs = append(b.subs[:i:i], b.subs[i+1:]...)
				b.active.Add(-1)
				i--
			}
		}
		b.mu.Unlock()
	}
	b.parent.Publish(e)
}

func deliver(s *subscriber, e Event) (ok bool) {
	defer func() {
		if r := recover(); r != nil {
			slog.Error("agentry: event subscriber panicked; unsubscribed", "event", string(e.Type), "panic", fmt.Sprint(r))
			s.dropped = true
			ok = false
		}
	}()
	s.fn(e)
	return true
}

// Subscribe calls fn with each event from now on, until the returned
// function is called.
func (b *Bus) Subscribe(fn func(Event)) (unsubscribe func()) {
	s := &subscriber{fn: fn}
	b.mu.Lock()
	b.subs = append(b.subs, s)
	b.active.Add(1)
	b.mu.Unlock()
	var once sync.Once
	return func() {
		once.Do(func() {
			b.mu.Lock()
			defer b.mu.Unlock()
			if s.dropped {
				return
			}
			for i, x := range b.subs {
				if x == s {
					b.subs = append(b.subs[:i:i], b.subs[i+1:]...)
					break
				}
			}
			b.active.Add(-1)
		})
	}
}

// Channel returns a channel that receives each event. Nothing is dropped:
// when the buffer is full the publisher waits, so read promptly. Call the
// returned function to stop; the channel is then closed.
func (b *Bus) Channel(buffer int) (<-chan Event, func()) {
	ch := make(chan Event, buffer)
	done := make(chan struct{})
	unsub := b.Subscribe(func(e Event) {
		select {
		case ch <- e:
		case <-done:
		}
	})
	var once sync.Once
	return ch, func() {
		once.Do(func() {
			close(done)
			unsub()
			close(ch)
		})
	}
}

// All returns an iterator over the events published from now on until ctx
// is done or the loop stops.
func (b *Bus) All(ctx context.Context) iter.Seq[Event] {
	return func(yield func(Event) bool) {
		ch, stop := b.Channel(64)
		defer func() {
			stop()
			for range ch { // release a publisher blocked on a full buffer
			}
		}()
		for {
			select {
			case e, ok := <-ch:
				if !ok || !yield(e) {
					return
				}
			case <-ctx.Done():
				return
			}
		}
	}
}

// JSONLines returns a subscriber that writes each event as one line of
// JSON to w. Write errors are counted, not returned: see the returned
// func's second result.
func JSONLines(w io.Writer) (fn func(Event), errs func() error) {
	var mu sync.Mutex
	var first error
	enc := json.NewEncoder(w)
	return func(e Event) {
			mu.Lock()
			defer mu.Unlock()
			if err := enc.Encode(e); err != nil && first == nil {
				first = err
			}
		}, func() error {
			mu.Lock()
			defer mu.Unlock()
			return first
		}
}

// Slog returns a subscriber that logs each event to l at debug level
// (errors at error level).
func Slog(l *slog.Logger) func(Event) {
	return func(e Event) {
		level := slog.LevelDebug
		attrs := []slog.Attr{slog.String("run_id", e.RunID), slog.String("agent", e.AgentName), slog.Int("turn", e.Turn)}
		if e.Tool != nil {
			attrs = append(attrs, slog.String("tool", e.Tool.Name), slog.String("call_id", e.Tool.ID))
			if e.Tool.Status != "" {
				attrs = append(attrs, slog.String("status", e.Tool.Status), slog.Float64("duration_ms", e.Tool.DurationMS))
			}
		}
		if e.Error != nil {
			level = slog.LevelError
			attrs = append(attrs, slog.String("code", e.Error.Code), slog.String("error", e.Error.Message))
		}
		l.LogAttrs(context.Background(), level, "agentry "+string(e.Type), attrs...)
	}
}
