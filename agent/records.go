package agent

import (
	"encoding/json"

	"github.com/agentry/agentry/llm"
	"github.com/agentry/agentry/tool"
)

// The records of a run's log, as the run log writes them (store.Format
// names their version). A change to one that a reader of an older log
// would misread is a new format.

// startRecord opens a run's log: enough to build the agent again and to
// start its session as it was.
type startRecord struct {
	Kind          string            `json:"kind"`
	RunID         string            `json:"run_id"`
	SessionID     string            `json:"session_id"`
	ParentRunID   string            `json:"parent_run_id,omitempty"`
	Spec          json.RawMessage   `json:"spec"`
	BaseDir       string            `json:"base_dir,omitempty"`
	AgentsDir     string            `json:"agents_dir,omitempty"`
	Model         string            `json:"model,omitempty"`
	Input         map[string]any    `json:"input"`
	UserID        string            `json:"user_id,omitempty"`
	CorrelationID string            `json:"correlation_id,omitempty"`
	TraceParent   string            `json:"trace_parent,omitempty"`
	Metadata      map[string]string `json:"metadata,omitempty"`
	StartedAt     Timestamp         `json:"started_at"`
	// Memory is what recall put into the system prompt, for a resume to
	// put it back as it was.
	Memory string `json:"memory,omitempty"`
}

// modelRecord is one model call: what was asked (as a digest) and the
// whole answer.
type modelRecord struct {
	N          int         `json:"n"`
	Agent      string      `json:"agent,omitempty"`
	Digest     string      `json:"digest"`
	Response   *response   `json:"response,omitempty"`
	Error      *modelError `json:"error,omitempty"`
	Attempts   int         `json:"attempts"`
	DurationMS float64     `json:"duration_ms"`
}

// response is an llm.Response as the log keeps it: tool call arguments
// as the model wrote them, byte for byte (JSON encoding would compact
// them, and the replayed transcript would differ from the original).
type response struct {
	Content      string     `json:"content,omitempty"`
	ToolCalls    []toolCall `json:"tool_calls,omitempty"`
	Usage        llm.Usage  `json:"usage"`
	Model        string     `json:"model,omitempty"`
	Provider     string     `json:"provider,omitempty"`
	FinishReason string     `json:"finish_reason,omitempty"`
}

type toolCall struct {
	ID        string `json:"id"`
	Name      string `json:"name"`
	Arguments string `json:"arguments"`
	Signature []byte `json:"signature,omitempty"`
}

func newResponse(r *llm.Response) *response {
	if r == nil {
		return nil
	}
	out := &response{Content: r.Content, Usage: r.Usage, Model: r.Model, Provider: r.Provider, FinishReason: r.FinishReason}
	for _, c := range r.ToolCalls {
		out.ToolCalls = append(out.ToolCalls, toolCall{ID: c.ID, Name: c.Name, Arguments: string(c.Arguments), Signature: c.Signature})
	}
	return out
}

func (r *response) llm() *llm.Response {
	out := &llm.Response{Content: r.Content, Usage: r.Usage, Model: r.Model, Provider: r.Provider, FinishReason: r.FinishReason}
	for _, c := range r.ToolCalls {
		out.ToolCalls = append(out.ToolCalls, llm.ToolCall{ID: c.ID, Name: c.Name, Arguments: json.RawMessage(c.Arguments), Signature: c.Signature})
	}
	return out
}

type modelError struct {
	Kind    string `json:"kind"`
	Status  int    `json:"status,omitempty"`
	Message string `json:"message"`
}

// intentRecord is a tool call about to run.
type intentRecord struct {
	CallID       string           `json:"call_id"`
	Tool         string           `json:"tool"`
	Arguments    string           `json:"arguments"`
	Idempotency  tool.Idempotency `json:"idempotency"`
	Deduplicates bool             `json:"deduplicates,omitempty"`
}

// resultRecord is a finished tool call.
// Arguments and Output are strings: the bytes the model and the tool
// wrote, which JSON encoding would compact.
type resultRecord struct {
	CallID      string             `json:"call_id"`
	Tool        string             `json:"tool"`
	Arguments   string             `json:"arguments"`
	Output      *string            `json:"output,omitempty"`
	Observation string             `json:"observation,omitempty"`
	Error       *tool.ErrorDetails `json:"error,omitempty"`
	Attempts    int                `json:"attempts,omitempty"`
	DurationMS  float64            `json:"duration_ms"`
	StartedAt   Timestamp          `json:"started_at"`
}

// resumeRecord marks where a resumed run took over: the events of turns
// from Turn on that were written before it are superseded.
type resumeRecord struct {
	Turn     int      `json:"turn"`
	Holder   string   `json:"holder"`
	Model    string   `json:"model,omitempty"`
	Approved []string `json:"approved,omitempty"`
	Denied   []string `json:"denied,omitempty"`
	// Reason is why the calls were denied, when a person said.
	Reason string `json:"reason,omitempty"`
}

// approvalRecord is a call that waits for a person's approval.
type approvalRecord struct {
	CallID    string `json:"call_id"`
	Tool      string `json:"tool"`
	Arguments string `json:"arguments"`
	Rule      string `json:"rule"`
}

func mustJSON(v any) json.RawMessage {
	b, err := json.Marshal(v)
	if err != nil {
		// Every record type marshals; a value inside that does not (a
		// tool's output is already JSON) is reported, not lost.
		b, _ = json.Marshal(map[string]string{"unencodable": err.Error()})
	}
	return b
}
