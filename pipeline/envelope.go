package pipeline

import (
	"github.com/agentry/agentry/agent"
)

// EnvelopeFormat tags a serialised envelope.
const EnvelopeFormat = "agentry.envelope/v1"

// Envelope is what travels through a pipeline: the input, every stage's
// output by output key, metadata, the history of stages run, the hop
// count, and errors. It is plain data and serialises to JSON, so a paused
// pipeline can be stored and resumed.
type Envelope struct {
	Format   string                    `json:"format"`
	ID       string                    `json:"id"`
	Pipeline string                    `json:"pipeline"`
	RawInput map[string]any            `json:"raw_input"`
	Outputs  map[string]map[string]any `json:"outputs"`
	Metadata map[string]any            `json:"metadata,omitempty"`
	History  []StageRecord             `json:"history"`
	HopCount int                       `json:"hop_count"`
	Errors   []StageError              `json:"errors,omitempty"`
	// Current is the stage to run next (while paused: the paused stage).
	Current string `json:"current,omitempty"`
	// Pending is set while the pipeline waits for the user.
	Pending *Pending `json:"pending,omitempty"`
}

// StageRecord is one run of a stage.
type StageRecord struct {
	Stage      string          `json:"stage"`
	Agent      string          `json:"agent"`
	Hop        int             `json:"hop"`
	Outcome    agent.Outcome   `json:"outcome"`
	Next       string          `json:"next,omitempty"`
	RunID      string          `json:"run_id,omitempty"`
	StartedAt  agent.Timestamp `json:"started_at"`
	DurationMS float64         `json:"duration_ms"`
	Error      string          `json:"error,omitempty"`
	Tokens     int             `json:"tokens,omitempty"`
	CostUSD    float64         `json:"cost_usd,omitempty"`
}

// StageError is an error a stage ended with.
type StageError struct {
	Stage   string `json:"stage"`
	Code    string `json:"code"`
	Message string `json:"message"`
}

// Pending is what a paused pipeline needs from the user.
type Pending struct {
	Stage   string        `json:"stage"`
	Outcome agent.Outcome `json:"outcome"`
	// Question is what to ask: the stage output's "question" or "message".
	Question string         `json:"question,omitempty"`
	Output   map[string]any `json:"output,omitempty"`
}

// Output returns a stage's output by its output key.
func (e *Envelope) Output(key string) map[string]any { return e.Outputs[key] }
