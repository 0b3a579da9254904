package tool

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"time"
)

// HintsKey is the member of a tool's JSON output that carries its Hints.
const HintsKey = "agent_hints"

// Hints are what a tool tells the agent about its result (the AgentHints of
// the Noema spec): how good the source is, how long the result stays
// valid, its risks, what it depends on, its expected impact, and what to do
// next. A tool returns them as the "agent_hints" member of its output
// object.
type Hints struct {
	// SourceQuality is "high", "medium", "low" or "unknown".
	SourceQuality string `json:"source_quality,omitempty"`
	// ValidityPeriod is how long the result may be reused: seconds as a
	// number, or a duration such as "5m". Within a run, a call with the same
	// arguments is answered from the cache for that long.
	ValidityPeriod Duration `json:"validity_period,omitempty"`
	RiskFactors    []string `json:"risk_factors,omitempty"`
	Dependencies   []string `json:"dependencies,omitempty"`
	// EstimatedImpact is 0..1.
	EstimatedImpact      *float64      `json:"estimated_impact,omitempty"`
	SuggestedNextActions []string      `json:"suggested_next_actions,omitempty"`
	Alternatives         []Alternative `json:"alternatives,omitempty"`
}

// Alternative is another approach the tool (or the agent) considered.
type Alternative struct {
	Approach        string   `json:"approach"`
	Confidence      float64  `json:"confidence"`
	Reasoning       string   `json:"reasoning,omitempty"`
	Pros            []string `json:"pros,omitempty"`
	Cons            []string `json:"cons,omitempty"`
	EstimatedImpact float64  `json:"estimated_impact,omitempty"`
}

// Duration reads seconds (a number) or a Go duration string.
type Duration time.Duration

// UnmarshalJSON accepts 300, 1.5 or "5m".
func (d *Duration) UnmarshalJSON(b []byte) error {
	var s string
	if json.Unmarshal(b, &s) == nil {
		v, err := time.ParseDuration(s)
		if err != nil {
			return fmt.Errorf("validity_period %q: %w", s, err)
		}
		*d = Duration(v)
		return nil
	}
	var secs float64
	if err := json.Unmarshal(b, &secs); err != nil {
		return fmt.Errorf("validity_period: want seconds or a duration string")
	}
	*d = Duration(secs * float64(time.Second))
	return nil
}

// MarshalJSON writes the duration as a string ("5m0s").
func (d Duration) MarshalJSON() ([]byte, error) { return json.Marshal(time.Duration(d).String()) }

var hintsKeyQuoted = []byte(`"` + HintsKey + `"`)

// HintsOf reads the hints in a tool's output, or returns nil.
func HintsOf(out json.RawMessage) *Hints {
	if len(out) == 0 || out[0] != '{' || !bytes.Contains(out, hintsKeyQuoted) {
		return nil
	}
	var wrapper map[string]json.RawMessage
	if json.Unmarshal(out, &wrapper) != nil {
		return nil
	}
	raw, ok := wrapper[HintsKey]
	if !ok {
		return nil
	}
	var h Hints
	if json.Unmarshal(raw, &h) != nil {
		return nil
	}
	return &h
}

// String shows the hints to a model in one or a few lines.
func (h *Hints) String() string {
	var parts []string
	if h.SourceQuality != "" {
		parts = append(parts, "source quality "+h.SourceQuality)
	}
	if h.ValidityPeriod > 0 {
		parts = append(parts, "valid for "+time.Duration(h.ValidityPeriod).String())
	}
	if len(h.RiskFactors) > 0 {
		parts = append(parts, "risks: "+strings.Join(h.RiskFactors, ", "))
	}
	if len(h.Dependencies) > 0 {
		parts = append(parts, "depends on: "+strings.Join(h.Dependencies, ", "))
	}
	if h.EstimatedImpact != nil {
		parts = append(parts, fmt.Sprintf("estimated impact %.2f", *h.EstimatedImpact))
	}
	if len(h.SuggestedNextActions) > 0 {
		parts = append(parts, "suggested next: "+strings.Join(h.SuggestedNextActions, ", "))
	}
	for _, a := range h.Alternatives {
		parts = append(parts, fmt.Sprintf("alternative: %s (confidence %.2f)", a.Approach, a.Confidence))
	}
	return strings.Join(parts, "; ")
}
