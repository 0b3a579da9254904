package agent

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/agentry/agentry/llm"
)

const labelled = `"agent_name": "labels", "version": "v1", "model_name": "m",
	"output_schema": {"type": "object", "required": ["tone", "depth"], "properties": {
		"tone": {"type": "string", "enum": ["direct", "formal"]},
		"depth": {"type": "string", "enum": ["short", "long"]},
		"score": {"type": "integer"}}},
	"defaults": {"depth": "short"}`

func TestOutputValidation(t *testing.T) {
	tests := []struct {
		name        string
		replies     []reply
		attempts    string
		wantErr     error
		wantValid   bool
		wantTurns   int
		wantResult  map[string]any
		wantProblem string // in the correction sent to the model
	}{
		{"valid, default filled", []reply{answer("Sure:\n```json\n{\"tone\": \"direct\"}\n```")}, `{}`, nil, true, 1,
			map[string]any{"tone": "direct", "depth": "short"}, ""},
		{"corrected", []reply{answer(`{"tone": "rude", "score": 1.5}`), answer(`{"tone": "formal", "depth": "long", "score": 2}`)}, `{}`, nil, true, 2,
			map[string]any{"tone": "formal", "depth": "long"}, "tone: value must be one of"},
		{"not JSON, corrected", []reply{answer("I think it is direct."), answer(`{"tone": "direct"}`)}, `{}`, nil, true, 2,
			map[string]any{"tone": "direct"}, "no JSON object found"},
		{"never valid", []reply{answer(`{"tone": 1}`), answer(`{"tone": 2}`)}, `{"output_attempts": 1}`, ErrValidation, false, 2, nil, "tone: got number, want string"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := &recorder{replies: tt.replies}
			a := newTestAgent(t, `{`+labelled+`, "retry": `+tt.attempts+`}`, m)
			res, err := a.Run(context.Background(), map[string]any{"task": "label it"})
			if !errors.Is(err, tt.wantErr) || (tt.wantErr == nil) != (err == nil) {
				t.Fatalf("err = %v, want %v", err, tt.wantErr)
			}
			if res.Validated == nil || *res.Validated != tt.wantValid || res.Iterations != tt.wantTurns {
				t.Fatalf("validated %v iterations %d", res.Validated, res.Iterations)
			}
			if len(m.reqs[0].ResponseSchema) == 0 {
				t.Error("the output schema was not requested from the model")
			}
			if tt.wantProblem != "" {
				last := m.reqs[1].Messages[len(m.reqs[1].Messages)-1]
				if last.Role != llm.RoleUser || !strings.Contains(last.Content, tt.wantProblem) {
					t.Errorf("correction %q lacks %q", last.Content, tt.wantProblem)
				}
			}
			if tt.wantResult != nil {
				got, ok := res.Result.(map[string]any)
				if !ok {
					t.Fatalf("result %#v", res.Result)
				}
				for k, v := range tt.wantResult {
					if got[k] != v {
						t.Errorf("result[%s] = %v, want %v", k, got[k], v)
					}
				}
			}
			if tt.wantErr != nil {
				if res.Success || res.Error.Code != CodeValidation || res.Result != res.RawContent || res.TerminateReason != ReasonCompleted {
					t.Errorf("invalid output result %+v", res)
				}
			}
		})
	}
}

// TestWithOutputSchema: an agent without an output schema, given one for
// a caller, answers structured and validated, the agent it came from
// unchanged; an agent with a schema of its own refuses another.
func TestWithOutputSchema(t *testing.T) {
	model := &recorder{replies: []reply{answer(`{"city": "Lisbon", "days": 3}`), answer("Lisbon, for three days.")}}
	a := newTestAgent(t, `{"agent_name": "planner", "version": "v1", "model_name": "m", "system_text": "Plan."}`, model)
	typed, err := a.WithOutputSchema(json.RawMessage(`{"type": "object", "required": ["city", "days"],
		"properties": {"city": {"type": "string"}, "days": {"type": "integer"}}}`))
	if err != nil {
		t.Fatal(err)
	}
	defer typed.Close()
	res, err := typed.Run(context.Background(), map[string]any{"task": "Plan a trip."})
	if err != nil {
		t.Fatal(err)
	}
	if got, _ := res.Result.(map[string]any); got["city"] != "Lisbon" || res.Validated == nil || !*res.Validated || !strings.HasPrefix(res.AgentVersion, "v1-schema.") {
		t.Errorf("the typed run: %#v validated %v", res.Result, res.Validated)
	}
	if res, err := a.Run(context.Background(), map[string]any{"task": "Plan a trip."}); err != nil || res.Result != "Lisbon, for three days." {
		t.Errorf("the agent it came from: %#v %v", res.Result, err)
	}
	if _, err := typed.WithOutputSchema(json.RawMessage(`{"type": "object"}`)); !errors.Is(err, ErrConfig) {
		t.Errorf("a second schema: %v", err)
	}
}
