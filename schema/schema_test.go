package schema

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
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

// TestRefReadsNothing attacks the compiler the way a caller's inline
// spec would: a $ref to a file of the host or to a URL is refused
// without reading it, so the error tells nothing of what is there; a
// $ref inside the document works.
func TestRefReadsNothing(t *testing.T) {
	secret := filepath.Join(t.TempDir(), "secret.json")
	if err := os.WriteFile(secret, []byte(`{"type": "string", "description": "the-host-secret"}`), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, ref := range []string{"file://" + secret, secret, "http://127.0.0.1:1/schema.json", "file:///etc/hostname"} {
		t.Run(ref, func(t *testing.T) {
			_, err := Compile(json.RawMessage(`{"type": "object", "properties": {"a": {"$ref": "` + ref + `"}}}`))
			if err == nil || strings.Contains(err.Error(), "the-host-secret") || strings.Contains(err.Error(), "invalid character") ||
				!strings.Contains(err.Error(), "a schema reads no file or URL") {
				t.Errorf("Compile: %v", err)
			}
		})
	}
	s, err := Compile(json.RawMessage(`{"$defs": {"name": {"type": "string"}}, "type": "object", "properties": {"a": {"$ref": "#/$defs/name"}}}`))
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Validate(map[string]any{"a": 1}); err == nil {
		t.Error("the local $ref was not applied")
	}
}
