// Package schema compiles and applies JSON Schemas (draft 2020-12 by
// default; the $schema keyword selects another draft). It is how agentry
// validates tool arguments given as raw schemas and structured outputs.
package schema

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"golang.org/x/text/language"
	"golang.org/x/text/message"
)

// Schema is a compiled JSON Schema, safe for concurrent use.
type Schema struct {
	raw json.RawMessage
	s   *jsonschema.Schema
}

// Compile parses and compiles a JSON Schema. Formats ("date-time",
// "email", ...) are asserted, not only annotated.
func Compile(raw json.RawMessage) (*Schema, error) {
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(raw))
	if err != nil {
		return nil, fmt.Errorf("schema: not JSON: %w", err)
	}
	c := jsonschema.NewCompiler()
	c.UseLoader(noLoader{})
	c.DefaultDraft(jsonschema.Draft2020)
	c.AssertFormat()
	const url = "mem:///schema.json"
	if err := c.AddResource(url, doc); err != nil {
		return nil, fmt.Errorf("schema: %w", err)
	}
	s, err := c.Compile(url)
	if err != nil {
		return nil, fmt.Errorf("schema: %w", err)
	}
	return &Schema{raw: raw, s: s}, nil
}

// noLoader loads nothing: a schema is all in its document. A "$ref" to a
// file or a URL would let whoever writes a spec (a caller's inline spec)
// make the process read a file of its host, or reach a host, and learn
// from the error what it found.
type noLoader struct{}

func (noLoader) Load(url string) (any, error) {
	return nil, fmt.Errorf("%s is outside the schema: a schema reads no file or URL; put what it refers to under $defs", url)
}

// Raw returns the schema's JSON text.
func (s *Schema) Raw() json.RawMessage { return s.raw }

// Problem is one way an instance fails a schema.
type Problem struct {
	// Path is the instance location as a dotted path ("items[2].name"),
	// empty for the top level.
	Path    string `json:"path"`
	Message string `json:"message"`
}

func (p Problem) String() string {
	if p.Path == "" {
		return p.Message
	}
	return p.Path + ": " + p.Message
}

// ValidationError lists every problem found.
type ValidationError struct {
	Problems []Problem
}

func (e *ValidationError) Error() string {
	parts := make([]string, len(e.Problems))
	for i, p := range e.Problems {
		parts[i] = p.String()
	}
	return "schema validation failed: " + strings.Join(parts, "; ")
}

// Strings returns the problems as "path: message" lines.
func (e *ValidationError) Strings() []string {
	out := make([]string, len(e.Problems))
	for i, p := range e.Problems {
		out[i] = p.String()
	}
	return out
}

// ValidateJSON validates a JSON document. Malformed JSON is a
// *ValidationError too.
func (s *Schema) ValidateJSON(data []byte) error {
	v, err := jsonschema.UnmarshalJSON(bytes.NewReader(data))
	if err != nil {
		return &ValidationError{Problems: []Problem{{Message: "not valid JSON: " + err.Error()}}}
	}
	return s.Validate(v)
}

// Validate validates a value decoded from JSON (map[string]any,
// []any, string, float64 or json.Number, bool, nil).
func (s *Schema) Validate(v any) error {
	err := s.s.Validate(v)
	if err == nil {
		return nil
	}
	var ve *jsonschema.ValidationError
	if !errors.As(err, &ve) {
		return &ValidationError{Problems: []Problem{{Message: err.Error()}}}
	}
	var probs []Problem
	collect(ve, &probs)
	return &ValidationError{Problems: probs}
}

var printer = message.NewPrinter(language.English)

func collect(e *jsonschema.ValidationError, out *[]Problem) {
	if len(e.Causes) == 0 {
		*out = append(*out, Problem{Path: dotted(e.InstanceLocation), Message: e.ErrorKind.LocalizedString(printer)})
		return
	}
	for _, c := range e.Causes {
		collect(c, out)
	}
}

func dotted(loc []string) string {
	var b strings.Builder
	for _, p := range loc {
		if p != "" && p[0] >= '0' && p[0] <= '9' && strings.Trim(p, "0123456789") == "" {
			b.WriteString("[" + p + "]")
			continue
		}
		if b.Len() > 0 {
			b.WriteByte('.')
		}
		b.WriteString(p)
	}
	return b.String()
}

// Object decodes a JSON Schema into the map vendors' SDKs take, without
// the $schema keyword, which their APIs refuse. An empty schema is an
// object with no properties.
func Object(raw json.RawMessage) (map[string]any, error) {
	if len(raw) == 0 {
		return map[string]any{"type": "object", "properties": map[string]any{}}, nil
	}
	var m map[string]any
	if err := json.Unmarshal(raw, &m); err != nil {
		return nil, err
	}
	delete(m, "$schema")
	return m, nil
}
