package schema

import (
	"errors"
	"strings"
	"testing"
)

func TestValidate(t *testing.T) {
	s, err := Compile([]byte(`{"type": "object", "required": ["name", "tags"],
		"properties": {"name": {"type": "string"}, "tags": {"type": "array", "items": {"enum": ["a", "b"]}},
		"when": {"type": "string", "format": "date-time"}, "n": {"type": "integer", "minimum": 1}}}`))
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		in   string
		want []string
	}{
		{`{"name": "x", "tags": ["a"]}`, nil},
		{`{"tags": []}`, []string{"missing property 'name'"}},
		{`{"name": 1, "tags": ["c"]}`, []string{"name: got number, want string", "tags[0]: value must be one of"}},
		{`{"name": "x", "tags": [], "when": "yesterday"}`, []string{"when: 'yesterday' is not valid date-time"}},
		{`{"name": "x", "tags": [], "n": 0}`, []string{"n: minimum: got 0, want 1"}},
		{`{"name": `, []string{"not valid JSON"}},
	}
	for _, tt := range tests {
		err := s.ValidateJSON([]byte(tt.in))
		if tt.want == nil {
			if err != nil {
				t.Errorf("%s: %v", tt.in, err)
			}
			continue
		}
		var ve *ValidationError
		if !errors.As(err, &ve) {
			t.Fatalf("%s: %v", tt.in, err)
		}
		msg := strings.Join(ve.Strings(), "\n")
		for _, w := range tt.want {
			if !strings.Contains(msg, w) {
				t.Errorf("%s: problems\n%s\nlack %q", tt.in, msg, w)
			}
		}
	}
	if _, err := Compile([]byte(`{"type": "nothing"}`)); err == nil {
		t.Error("bad schema compiled")
	}
	if _, err := Compile([]byte(`{`)); err == nil {
		t.Error("bad JSON compiled")
	}
}
