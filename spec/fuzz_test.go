package spec

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"testing"
)

// FuzzParse: any bytes give a spec or an *Error matched by ErrInvalid,
// never a panic; a spec that parses survives a JSON round trip unchanged
// and passes Check again.
func FuzzParse(f *testing.F) {
	seeds, _ := filepath.Glob("testdata/agents/*/*.json")
	more, _ := filepath.Glob("../examples/*/agent.json")
	for _, p := range append(seeds, more...) {
		if data, err := os.ReadFile(p); err == nil {
			f.Add(data)
		}
	}
	f.Add([]byte(`{"agent_name": "a", "version": "v1", "mode": "chooser", "model_name": "scripted:m.json",
		"input_keys": ["q"], "purpose_text": "${q}", "output_schema": {"type": "object", "properties": {"choice": {"enum": ["a", "b"]}}},
		"enums": {"choice": ["a", "b"]}, "retry": {"attempts": 0}, "limits": {"max_turns": 3, "max_cost_usd": 0.1}}`))
	f.Add([]byte(`{"agent_name": "a", "version": "v1", "input_schema": {"type": "object", "required": ["x"]}, "system_text": "${y}"}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		s, err := Parse("fuzz", data)
		if err != nil {
			var se *Error
			if !errors.Is(err, ErrInvalid) || !errors.As(err, &se) || len(se.Problems) == 0 {
				t.Fatalf("error %T %v with spec %v", err, err, s)
			}
			return
		}
		out, err := json.Marshal(s)
		if err != nil {
			t.Fatalf("a parsed spec does not marshal: %v", err)
		}
		again, err := Parse("again", out)
		if err != nil {
			t.Fatalf("a parsed spec does not parse again: %v\n%s", err, out)
		}
		if !reflect.DeepEqual(jsonOf(t, s), jsonOf(t, again)) {
			t.Fatalf("round trip changed the spec:\n%s\n%s", out, jsonOf(t, again))
		}
		if _, err := s.Compile(); err != nil {
			t.Fatalf("a checked spec does not compile: %v", err)
		}
	})
}

func jsonOf(t *testing.T, s *Spec) any {
	data, err := json.Marshal(s)
	if err != nil {
		t.Fatal(err)
	}
	var v any
	if err := json.Unmarshal(data, &v); err != nil {
		t.Fatal(err)
	}
	return v
}
