package agent

import (
	"context"
	"encoding/json"
	"fmt"
	"reflect"

	"github.com/google/jsonschema-go/jsonschema"
)

// WithOutput gives the agent the JSON Schema of T as its output_schema
// when its spec has none, so that its answer is validated (and sent back
// for correction) as any schema's is, and RunAs[T] decodes it. T must be
// a struct (the answer is a JSON object); its schema is derived as tool
// arguments' are (tool.SchemaFor).
func WithOutput[T any]() Option {
	return func(o *options) { o.outputType = reflect.TypeFor[T]() }
}

// outputSchema is the JSON Schema of the output type t.
func outputSchema(t reflect.Type) (json.RawMessage, error) {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t.Kind() != reflect.Struct {
		return nil, fmt.Errorf("WithOutput: %s is not a struct (an output is a JSON object)", t)
	}
	s, err := jsonschema.ForType(t, &jsonschema.ForOptions{})
	if err != nil {
		return nil, fmt.Errorf("WithOutput: %s: %w", t, err)
	}
	s.Schema = "https://json-schema.org/draft/2020-12/schema"
	return json.Marshal(s)
}

// RunAs runs a with input and returns its output as a T: the validated
// object for an agent with an output schema (WithOutput[T] gives one),
// the answer's text for a T of kind string. The Result comes back
// whatever happens. The error is the run's, or says why the output does
// not decode into a T (an *OutputError).
func RunAs[T any](ctx context.Context, a *Agent, input map[string]any, opts ...RunOption) (T, *Result, error) {
	var out T
	res, err := a.Run(ctx, input, opts...)
	if err != nil || res == nil {
		return out, res, err
	}
	if err := decodeOutput(res.Result, &out); err != nil {
		return out, res, &OutputError{Type: reflect.TypeFor[T]().String(), Err: err}
	}
	return out, res, nil
}

// OutputError says why a run's output is not the type asked for.
type OutputError struct {
	Type string
	Err  error
}

func (e *OutputError) Error() string {
	return fmt.Sprintf("agent: the output does not decode into %s: %v", e.Type, e.Err)
}

func (e *OutputError) Unwrap() error { return e.Err }

// decodeOutput puts a Result's result into out: a string into a string
// kind as it is, anything else through JSON.
func decodeOutput(v any, out any) error {
	if s, ok := v.(string); ok {
		if rv := reflect.ValueOf(out).Elem(); rv.Kind() == reflect.String {
			rv.SetString(s)
			return nil
		}
		return json.Unmarshal([]byte(s), out)
	}
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	return json.Unmarshal(b, out)
}
