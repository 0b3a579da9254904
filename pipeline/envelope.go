package pipeline

import (
	"encoding/json"
	"fmt"

	"github.com/agentry/agentry/agent"
	"github.com/agentry/agentry/internal/ids"
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

// NewEnvelope makes an envelope for raw input: a text is the input
// {"task": text} (the jeeves seed's raw input string), a map is the
// input as it is, and any other value that encodes to a JSON object
// (a struct) is that object. Pipeline.Process runs a pipeline on it, from
// its start stage.
func NewEnvelope(raw any) (*Envelope, error) {
	var input map[string]any
	switch v := raw.(type) {
	case nil:
		input = map[string]any{}
	case string:
		input = map[string]any{"task": v}
	default:
		m, err := jsonObject(v)
		if err != nil {
			return nil, fmt.Errorf("pipeline: raw input: %w", err)
		}
		input = m
	}
	return &Envelope{Format: EnvelopeFormat, ID: ids.New("env"), RawInput: input,
		Outputs: map[string]map[string]any{}, Metadata: map[string]any{}, History: []StageRecord{}}, nil
}

// jsonObject is v as the JSON object it encodes to: Go values (typed
// slices, structs, numbers of any type) become JSON values, as routing
// and plans read them.
func jsonObject(v any) (map[string]any, error) {
	if m, ok := v.(map[string]any); ok && plainJSON(m) {
		return m, nil
	}
	b, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil || m == nil {
		return nil, fmt.Errorf("%T is not a JSON object", v)
	}
	return m, nil
}

// plainJSON says v holds only what decoding JSON gives (maps, []any,
// strings, float64, json.Number, bools, nil): nothing to normalise.
func plainJSON(v any) bool {
	switch x := v.(type) {
	case nil, string, bool, float64, json.Number:
		return true
	case map[string]any:
		for _, e := range x {
			if !plainJSON(e) {
				return false
			}
		}
		return true
	case []any:
		for _, e := range x {
			if !plainJSON(e) {
				return false
			}
		}
		return true
	}
	return false
}
