package agent

import (
	"context"
	"encoding/json"
	"reflect"
	"testing"
)

// TestJSONAnswersAreJSON: without an output schema, a final answer that is
// one JSON object is the object (the raw text stays in raw_content, and a
// stated confidence counts), in the tools mode and in ReAct; prose that
// quotes an object, and JSON that is not an object, stay text.
func TestJSONAnswersAreJSON(t *testing.T) {
	obj := map[string]any{"city": "Lisbon", "days": float64(3), "confidence": 0.5}
	tests := []struct {
		name   string
		react  bool
		answer string
		want   any
	}{
		{name: "tools mode", answer: `{"city": "Lisbon", "days": 3, "confidence": 0.5}`, want: obj},
		{name: "fenced", answer: "```json\n{\"city\": \"Lisbon\", \"days\": 3, \"confidence\": 0.5}\n```", want: obj},
		{name: "react final answer", react: true, answer: "Thought: done.\nFinal Answer: {\"city\": \"Lisbon\", \"days\": 3, \"confidence\": 0.5}", want: obj},
		{name: "prose quoting an object", answer: `The plan is {"city": "Lisbon"}.`, want: `The plan is {"city": "Lisbon"}.`},
		{name: "a list", answer: `[1, 2]`, want: `[1, 2]`},
		{name: "a number", answer: `42`, want: `42`},
		{name: "broken JSON", answer: `{"city": }`, want: `{"city": }`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			sp := `{"agent_name": "j", "version": "v1", "model_name": "m"}`
			if tt.react {
				sp = `{"agent_name": "j", "version": "v1", "model_name": "m", "mode": "react"}`
			}
			a := newTestAgent(t, sp, &recorder{replies: []reply{answer(tt.answer)}})
			res, err := a.Run(context.Background(), nil)
			if err != nil {
				t.Fatal(err)
			}
			got, _ := json.Marshal(res.Result)
			want, _ := json.Marshal(tt.want)
			if _, isText := res.Result.(string); string(got) != string(want) || isText != reflect.DeepEqual(reflect.TypeOf(tt.want), reflect.TypeOf("")) {
				t.Errorf("result %#v, want %#v", res.Result, tt.want)
			}
			if _, isObj := tt.want.(map[string]any); isObj {
				if res.RawContent == "" || res.Validated != nil {
					t.Errorf("raw_content %q validated %v", res.RawContent, res.Validated)
				}
				if res.Confidence != 0.7 { // (0.9 + the stated 0.5) / 2
					t.Errorf("confidence %v, want 0.7", res.Confidence)
				}
			}
		})
	}
}
