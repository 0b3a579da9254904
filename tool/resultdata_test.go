package tool

import (
	"context"
	"encoding/json"
	"testing"
)

func TestNewResultData(t *testing.T) {
	r := NewResultData(map[string]any{
		"items_explored": []any{"a.go", "b.go"},
		"items_pending":  []string{"c.go"},
		"discoveries":    []any{map[string]any{"type": "func", "name": "Login", "location": "a.go:10"}},
		"evidence":       []any{map[string]any{"source": "a.go", "content": "func Login", "confidence": 0.9}},
		"evidence_note":  "kept",
		"discoveries_x":  3,
	})
	if len(r.ItemsExplored) != 2 || r.ItemsPending[0] != "c.go" || r.Discoveries[0].Name != "Login" || r.Evidence[0].Confidence != 0.9 ||
		r.Raw["evidence_note"] != "kept" || r.Raw["discoveries_x"] != 3 {
		t.Errorf("%+v", r)
	}
	bad := NewResultData(map[string]any{"items_explored": 7})
	if bad.ItemsExplored != nil || bad.Raw["items_explored"] != 7 {
		t.Errorf("a field of the wrong shape was lost: %+v", bad)
	}
	b, _ := json.Marshal(r)
	var back ResultData
	if json.Unmarshal(b, &back) != nil || back.Discoveries[0].Location != "a.go:10" {
		t.Errorf("round trip %s", b)
	}
}

func TestRiskSetsTheClass(t *testing.T) {
	type in struct{}
	for _, tt := range []struct {
		risk Risk
		opts []Option
		want Idempotency
	}{
		{RiskLow, nil, Safe},
		{RiskMedium, nil, Idempotent},
		{RiskHigh, nil, NonIdempotent},
		{RiskCritical, nil, NonIdempotent},
		{RiskLow, []Option{WithIdempotency(NonIdempotent)}, NonIdempotent}, // a class given wins
		{"", nil, NonIdempotent},
	} {
		tl, err := Func("t", "", func(context.Context, in) (int, error) { return 0, nil }, append([]Option{WithRisk(tt.risk)}, tt.opts...)...)
		if err != nil || tl.Info().Idempotency != tt.want {
			t.Errorf("risk %q: %v, class %s, want %s", tt.risk, err, tl.Info().Idempotency, tt.want)
		}
	}
	if _, err := Func("t", "", func(context.Context, in) (int, error) { return 0, nil }, WithRisk("extreme")); err == nil {
		t.Error("an unknown risk level was accepted")
	}
	if tl, err := New(Info{Name: "r", Risk: RiskLow}, func(context.Context, json.RawMessage) (json.RawMessage, error) { return nil, nil }); err != nil || tl.Info().Idempotency != Safe {
		t.Errorf("New with a risk: %v", err)
	}
}
