package tool

import (
	"encoding/json"
	"strings"
	"testing"
	"time"
)

func TestHintsOf(t *testing.T) {
	h := HintsOf(json.RawMessage(`{"card": "c1", "agent_hints": {"source_quality": "high", "validity_period": "5m",
		"risk_factors": ["stale"], "dependencies": ["deck"], "estimated_impact": 0.4, "suggested_next_actions": ["review"],
		"alternatives": [{"approach": "random card", "confidence": 0.2}]}}`))
	if h == nil || h.SourceQuality != "high" || time.Duration(h.ValidityPeriod) != 5*time.Minute || *h.EstimatedImpact != 0.4 || len(h.Alternatives) != 1 {
		t.Fatalf("%+v", h)
	}
	s := h.String()
	for _, w := range []string{"source quality high", "valid for 5m0s", "risks: stale", "depends on: deck", "estimated impact 0.40", "suggested next: review", "alternative: random card"} {
		if !strings.Contains(s, w) {
			t.Errorf("%q lacks %q", s, w)
		}
	}
	if h := HintsOf(json.RawMessage(`{"agent_hints": {"validity_period": 90}}`)); h == nil || time.Duration(h.ValidityPeriod) != 90*time.Second {
		t.Errorf("%+v", h)
	}
	for _, none := range []string{`3`, `{"x": 1}`, `{"agent_hints": {"validity_period": "soon"}}`, `[{"agent_hints": {}}]`} {
		if HintsOf(json.RawMessage(none)) != nil {
			t.Errorf("HintsOf(%s) found hints", none)
		}
	}
}
