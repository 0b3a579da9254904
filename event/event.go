// Package event carries what a run does, as it happens, to any number of
// subscribers: Go callbacks, channels, iterators, JSON lines, slog.
package event

import (
	"encoding/json"
	"time"
)

// Type names what happened.
type Type string

// The event types, in the order a run emits them.
const (
	RunStart      Type = "run_start"
	TurnStart     Type = "turn_start"
	Thinking      Type = "thinking"
	ContentChunk  Type = "content_chunk"
	ToolCallStart Type = "tool_call_start"
	ToolCallEnd   Type = "tool_call_end"
	// ToolProgress: a tool told how far its call got, or its server
	// logged a message, while the call ran (Tool: the call's id and name;
	// Progress: what it said).
	ToolProgress   Type = "tool_progress"
	PolicyDecision Type = "policy_decision"
	Retry          Type = "retry"
	// Compaction: the transcript was shortened to fit the model's context
	// window (Data: strategy, tokens_before, tokens_after, window,
	// messages_changed).
	Compaction Type = "compaction"
	TurnEnd    Type = "turn_end"
	Error      Type = "error"
	RunEnd     Type = "run_end"
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
	// Seq orders the events of a bus: 1, 2, 3, ... An event read back
	// from a stored run (its log, its server-sent events) carries its
	// place in the log instead, the SSE id: one number, increasing through
	// the run's whole life, across resumes and restarts.
	Seq uint64 `json:"seq"`
	// ParentRunID is set on the events of a sub-agent's run.
	ParentRunID string `json:"parent_run_id,omitempty"`
	// TraceID is the run's trace id, when it has one.
	TraceID string `json:"trace_id,omitempty"`
	// Content is the text of thinking, content_chunk and run_end events.
	Content string `json:"content,omitempty"`
	// Tool is set on tool_call_start and tool_call_end.
	Tool *ToolCall `json:"tool,omitempty"`
	// Progress is set on tool_progress.
	Progress *Progress `json:"progress,omitempty"`
	// Attempt is the failed attempt of a retry event (1 for the first).
	Attempt int `json:"attempt,omitempty"`
	// WaitMS is how long a retry waits.
	WaitMS int64 `json:"wait_ms,omitempty"`
	// Error is set on error and retry events, and on run_end of a failed run.
	Error *ErrorInfo `json:"error,omitempty"`
	// DurationMS is how long the turn took, on turn_end.
	DurationMS float64 `json:"duration_ms,omitempty"`
	// TotalTokens is what the run has used so far, on turn_end.
	TotalTokens int `json:"total_tokens,omitempty"`
	// Data holds the details of the events a run or a stage emits once
	// (run_start, run_end, agent_started, agent_completed, a fallback's
	// retry): model, terminate reason, outcome, tokens, cost. The events of
	// every turn carry theirs in the typed fields above, which cost no map.
	Data map[string]any `json:"data,omitempty"`
	// Dropped is how many events this subscriber missed just before this
	// one because it fell a whole buffer behind (see Subscribe). It is
	// never set for a subscriber that blocks.
	Dropped uint64 `json:"dropped,omitempty"`
}

// ToolCall describes a tool call on tool_call_start and tool_call_end.
type ToolCall struct {
	ID        string          `json:"id"`
	Name      string          `json:"name"`
	Arguments json.RawMessage `json:"arguments,omitempty"`
	// Output, Status ("success", "error", "skipped" for a call a budget
	// kept from running, or "awaiting_approval" for one that waits for a
	// person's decision), Error (for the last two, the reason) and
	// DurationMS are set on tool_call_end.
	Output     json.RawMessage `json:"output,omitempty"`
	Status     string          `json:"status,omitempty"`
	Error      string          `json:"error,omitempty"`
	DurationMS float64         `json:"duration_ms,omitempty"`
	Attempts   int             `json:"attempts,omitempty"`
}

// Progress is what a tool told of its call while it ran: how far it got
// (Progress of Total; Total 0 when unknown) and a message; a message its
// server logged has Level set.
type Progress struct {
	Progress float64 `json:"progress,omitempty"`
	Total    float64 `json:"total,omitempty"`
	Message  string  `json:"message,omitempty"`
	Level    string  `json:"level,omitempty"`
}

// ErrorInfo is an error as events carry it.
type ErrorInfo struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}
