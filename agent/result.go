package agent

import (
	"encoding/json"
	"time"

	"github.com/agentry/agentry/llm"
	"github.com/agentry/agentry/store"
	"github.com/agentry/agentry/tool"
)

// ErrorInfo is the error of a failed run.
type ErrorInfo struct {
	Code        string         `json:"code"`
	Message     string         `json:"message"`
	Recoverable bool           `json:"recoverable"`
	Details     map[string]any `json:"details,omitempty"`
}

// Timestamp is a time that marshals as RFC 3339 with milliseconds.
type Timestamp struct{ time.Time }

const timestampLayout = "2006-01-02T15:04:05.000Z07:00"

// MarshalJSON writes RFC 3339 with milliseconds.
func (t Timestamp) MarshalJSON() ([]byte, error) {
	b := make([]byte, 0, len(timestampLayout)+2)
	b = append(b, '"')
	b = t.UTC().AppendFormat(b, timestampLayout)
	return append(b, '"'), nil
}

// UnmarshalJSON reads any RFC 3339 time.
func (t *Timestamp) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return err
	}
	v, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return err
	}
	t.Time = v
	return nil
}

// Step is one entry of the reasoning trace: a tool call with its thought
// and observation (parallel calls of one turn are one step each).
type Step struct {
	Step        int     `json:"step"`
	Turn        int     `json:"turn"`
	Thought     string  `json:"thought"`
	Action      *Action `json:"action,omitempty"`
	Observation string  `json:"observation,omitempty"`
	// ParseError says why a ReAct reply could not be used.
	ParseError string `json:"parse_error,omitempty"`
	// FinalAnswer is set on the last step of a ReAct run.
	FinalAnswer string    `json:"final_answer,omitempty"`
	Timestamp   Timestamp `json:"timestamp"`
}

// Action is a tool call as the trace records it.
type Action struct {
	Tool       string          `json:"tool"`
	CallID     string          `json:"call_id,omitempty"`
	Input      json.RawMessage `json:"input"`
	Output     json.RawMessage `json:"output,omitempty"`
	Error      string          `json:"error,omitempty"`
	DurationMS float64         `json:"duration_ms"`
	Attempts   int             `json:"attempts,omitempty"`
	// Cached is set when the result came from an earlier call still valid.
	Cached bool        `json:"cached,omitempty"`
	Hints  *tool.Hints `json:"hints,omitempty"`
	// After says what the call waited for and why, when the turn's
	// calls ran in an order of their tools' dependencies (the steps are
	// in the order they ran).
	After string `json:"after,omitempty"`
}

// ModelCall summarises one model call (all its attempts).
type ModelCall struct {
	Agent            string  `json:"agent,omitempty"`
	Turn             int     `json:"turn"`
	Provider         string  `json:"provider"`
	Model            string  `json:"model"`
	PromptTokens     int     `json:"prompt_tokens"`
	CompletionTokens int     `json:"completion_tokens"`
	CostUSD          float64 `json:"cost_usd"`
	DurationMS       float64 `json:"duration_ms"`
	Attempts         int     `json:"attempts"`
	Error            string  `json:"error,omitempty"`
	// Partial is the text that arrived before a stream broke.
	Partial string `json:"partial,omitempty"`
}

// Metrics are the run's timings.
type Metrics struct {
	DurationMS     float64            `json:"duration_ms"`
	ModelLatencyMS float64            `json:"model_latency_ms"`
	ToolLatencyMS  map[string]float64 `json:"tool_latency_ms"`
	ToolCalls      int                `json:"tool_calls"`
	ToolErrors     int                `json:"tool_errors"`
	ParseErrors    int                `json:"parse_errors,omitempty"`
}

// Result is the complete record of a run, whatever its ending.
type Result struct {
	ID           string  `json:"id"`
	SessionID    string  `json:"session_id"`
	AgentName    string  `json:"agent_name"`
	AgentVersion string  `json:"agent_version"`
	Success      bool    `json:"success"`
	Outcome      Outcome `json:"outcome"`
	Result       any     `json:"result"`
	// OutputName is the name the agent's spec gives its output
	// (output_name): what Result holds.
	OutputName      string          `json:"output_name,omitempty"`
	RawContent      string          `json:"raw_content"`
	Validated       *bool           `json:"validated,omitempty"`
	TerminateReason TerminateReason `json:"terminate_reason"`
	Error           *ErrorInfo      `json:"error,omitempty"`
	// Waiting are the calls a run paused on (ErrAwaitingApproval), in the
	// turn's order: approve or deny each by its Key when resuming.
	Waiting    []ApprovalError `json:"waiting,omitempty"`
	StartedAt  Timestamp       `json:"started_at"`
	FinishedAt Timestamp       `json:"finished_at"`
	Iterations int             `json:"iterations"`
	Steps      []Step          `json:"steps"`
	Messages   []llm.Message   `json:"messages"`
	ToolsUsed  []string        `json:"tools_used"`
	TokenUsage llm.Usage       `json:"token_usage"`
	// EstimatedCost is the cost from the pricing table; nil (JSON null)
	// when a model of the run has no price.
	EstimatedCost *float64    `json:"estimated_cost_usd"`
	cost          float64     // what EstimatedCost points to
	Model         string      `json:"model"`
	Provider      string      `json:"provider"`
	ModelCalls    []ModelCall `json:"model_calls"`
	Confidence    float64     `json:"confidence"`
	Decision      string      `json:"decision"`
	// SourceQuality is the lowest quality the tools reported ("high",
	// "medium", "low", "unknown"), or empty when none did.
	SourceQuality   string             `json:"source_quality,omitempty"`
	ContextUsed     []string           `json:"context_used,omitempty"`
	AssumptionsMade []string           `json:"assumptions_made,omitempty"`
	Alternatives    []tool.Alternative `json:"alternatives,omitempty"`
	// Handoffs are the agents the conversation was handed to, in order;
	// the last one gave the answer.
	Handoffs []string `json:"handoffs,omitempty"`
	// MemoryDeltas are what the run wrote to memory and collections, in
	// order (the spec's memory.write and the memory tools).
	MemoryDeltas []MemoryDelta `json:"memory_deltas,omitempty"`
	// Diagnostics are what a person reading the run should know that is
	// not an error (a compacted transcript, a cut observation, a model
	// without a price).
	Diagnostics *Diagnostics `json:"diagnostics,omitempty"`
	// RetryInfo counts the run's retried model calls, and the last error
	// one was retried for.
	RetryInfo *RetryInfo `json:"retry_info,omitempty"`
	// Attachments are what the run's tools attached, by name: references
	// (URLs, paths, keys), never the bytes (tool.Call.Attach).
	Attachments map[string]string `json:"attachments,omitempty"`
	// TraceRef is the run id its stored trace is kept under (agentry trace
	// TRACE_REF), when the run was stored.
	TraceRef string `json:"trace_ref,omitempty"`
	// Seed is the seed the run's ids and randomness derived from, when it
	// had one (WithSeed, the spec's seed); Deterministic says it had a
	// fixed clock too (WithNow), so that it runs the same again.
	Seed          *int64 `json:"seed,omitempty"`
	Deterministic bool   `json:"deterministic"`
	// TraceID is the run's trace id, when it has one (WithTraceParent, or
	// the OpenTelemetry span the run joined).
	TraceID string `json:"trace_id,omitempty"`
	// PromptTemplate names the versioned template of the system prompt.
	PromptTemplate string  `json:"prompt_template,omitempty"`
	Metrics        Metrics `json:"metrics"`
}

// Diagnostics are a run's warnings.
type Diagnostics struct {
	Warnings []string `json:"warnings"`
}

// RetryInfo is how often a run's model calls were retried.
type RetryInfo struct {
	Attempts  int    `json:"attempts"`
	LastError string `json:"last_error,omitempty"`
}

// StoreStatus is how a run that ended with r stands in a run store, and
// the summary the store lists it with.
func (r *Result) StoreStatus() (store.Status, store.Summary) {
	status := store.Completed
	switch {
	case r.TerminateReason == ReasonAwaitingApproval:
		status = store.AwaitingApproval
	case r.TerminateReason == ReasonAborted:
		status = store.Aborted
	case r.Error != nil:
		status = store.Failed
	}
	sum := store.Summary{Outcome: string(r.Outcome), Turns: r.Iterations, Tokens: r.TokenUsage.TotalTokens, CostUSD: r.EstimatedCost}
	if r.Error != nil {
		sum.Error = r.Error.Message
	}
	return status, sum
}
