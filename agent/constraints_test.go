package agent

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/agentry/agentry/llm"
)

// TestInputConstraints: the Noema input's constraints tighten the run's
// budgets, never loosen them, and a confidence below requiredQuality
// makes the run partial; bad constraints are bad input.
func TestInputConstraints(t *testing.T) {
	pricing := llm.NewPricing(map[string]llm.Price{"m": {Prompt: 1000, Completion: 1000}})
	tests := []struct {
		name        string
		limits      string
		constraints any
		replies     []reply
		wantErr     error
		wantOutcome Outcome
		wantSuccess bool
	}{
		{"maxTime tightens the timeout", `{"timeout_ms": 60000}`, map[string]any{"maxTime": 20},
			[]reply{calls(call("a", "add", `{"a":1,"b":1}`)), {wait: true}}, ErrTimeout, OutcomePartial, false},
		{"maxTime does not loosen it", `{"timeout_ms": 20}`, map[string]any{"maxTime": 60000},
			[]reply{calls(call("a", "add", `{"a":1,"b":1}`)), {wait: true}}, ErrTimeout, OutcomePartial, false},
		{"maxCost tightens the cost budget", `{}`, map[string]any{"maxCost": 0.01},
			forever(5), ErrBudgetExceeded, OutcomePartial, false},
		{"requiredQuality met", `{}`, map[string]any{"requiredQuality": 0.5},
			[]reply{answer("done")}, nil, OutcomeSuccess, true},
		{"requiredQuality not met", `{}`, map[string]any{"requiredQuality": 0.95},
			[]reply{answer("done")}, ErrLowQuality, OutcomePartial, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := &recorder{replies: tt.replies}
			a, err := New(mustSpec(t, `{`+base+`, "tools": ["add"], "limits": `+tt.limits+`}`),
				WithProvider(m, "test"), WithTools(testTools(t)), WithPricing(pricing))
			if err != nil {
				t.Fatal(err)
			}
			res, err := a.Run(context.Background(), map[string]any{"who": "x", "constraints": tt.constraints})
			if !errors.Is(err, tt.wantErr) || (tt.wantErr == nil) != (err == nil) {
				t.Fatalf("err = %v, want %v", err, tt.wantErr)
			}
			if res.Outcome != tt.wantOutcome || res.Success != tt.wantSuccess {
				t.Errorf("outcome %s success %v, want %s %v (%+v)", res.Outcome, res.Success, tt.wantOutcome, tt.wantSuccess, res.Error)
			}
			if tt.wantErr == ErrLowQuality && (res.Result != "done" || res.Error.Code != CodeValidation || res.Error.Details["required_quality"] != 0.95) {
				t.Errorf("a partial answer keeps its result and says why: %+v", res.Error)
			}
		})
	}
	a := newTestAgent(t, `{`+base+`}`, &recorder{})
	for _, bad := range []any{"fast", map[string]any{"maxTime": "ten"}, map[string]any{"requiredQuality": 2}, map[string]any{"maxCost": -1}} {
		if _, err := a.NewSession(map[string]any{"who": "x", "constraints": bad}); !errors.Is(err, ErrInvalidInput) || !strings.Contains(err.Error(), "constraints") {
			t.Errorf("constraints %v: %v", bad, err)
		}
	}
}
