package tool

import (
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"time"

	"github.com/google/jsonschema-go/jsonschema"

	"github.com/agentry/agentry/schema"
)

// Func derives the JSON Schema of its arguments with
// github.com/google/jsonschema-go, the schema type the MCP Go SDK uses, so
// Go tools and MCP tools describe themselves alike. Calls are validated by
// package schema, the one validator of the module. The derived schemas use
// few keywords, so they are also compiled into a node tree (fastpath.go)
// that accepts common arguments in one pass over their bytes.

const draft2020 = "https://json-schema.org/draft/2020-12/schema"

// typeSchemas are the types whose JSON form is not what their Go kind
// suggests.
var typeSchemas = map[reflect.Type]*jsonschema.Schema{
	reflect.TypeFor[time.Time]():       {Type: "string", Format: "date-time"},
	reflect.TypeFor[json.RawMessage](): {},
	reflect.TypeFor[[]byte]():          {Types: []string{"null", "string"}, ContentEncoding: "base64"},
}

// SchemaFor returns the JSON Schema that Func derives for the arguments
// type In, to adjust (an enum, a pattern, a range) and give back with
// WithSchema.
//
// In must be a struct. Property names come from json tags; a field is
// required unless tagged omitempty or omitzero; a `jsonschema:"..."` tag
// is the field's description; structs allow no other properties; pointers
// and slices may be null; time.Time is a date-time string, []byte a
// base64 string, any and json.RawMessage anything.
func SchemaFor[In any]() (*jsonschema.Schema, error) {
	return deriveSchema(reflect.TypeFor[In]())
}

func deriveSchema(t reflect.Type) (*jsonschema.Schema, error) {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t.Kind() != reflect.Struct {
		return nil, fmt.Errorf("input type %s is not a struct (arguments are a JSON object)", t)
	}
	s, err := jsonschema.ForType(t, &jsonschema.ForOptions{TypeSchemas: typeSchemas})
	if err != nil {
		return nil, err
	}
	s.Schema = draft2020
	return s, nil
}

// argSchema is a tool's arguments schema in its three forms.
type argSchema struct {
	raw  json.RawMessage // for Info.Parameters
	full *schema.Schema  // the validator
	fast *node           // nil when the schema uses keywords the fast path does not know
}

func compileArgs(s *jsonschema.Schema) (argSchema, error) {
	if s.Type != "object" && !slices.Equal(s.Types, []string{"object"}) {
		return argSchema{}, errors.New(`schema: arguments are a JSON object: the schema's type must be "object"`)
	}
	raw, err := json.Marshal(s)
	if err != nil {
		return argSchema{}, fmt.Errorf("schema: %w", err)
	}
	full, err := schema.Compile(raw)
	if err != nil {
		return argSchema{}, err
	}
	return argSchema{raw: raw, full: full, fast: compileNode(s, true)}, nil
}

// validate checks args (valid JSON) and returns the problems, each naming
// the argument's path; none when args are valid.
func (a *argSchema) validate(args []byte) []string {
	if a.fast != nil && a.fast.accepts(args) {
		return nil
	}
	return problems(a.full, args)
}

// problems validates args with s and returns what is wrong, if anything.
func problems(s *schema.Schema, args []byte) []string {
	err := s.ValidateJSON(args)
	if err == nil {
		return nil
	}
	var ve *schema.ValidationError
	if errors.As(err, &ve) {
		return ve.Strings()
	}
	return []string{err.Error()}
}
