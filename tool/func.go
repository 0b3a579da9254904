package tool

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strconv"
	"strings"
	"time"
)

// ArgumentError reports arguments that do not match a tool's schema. The
// model sees it as an error observation and can correct itself.
type ArgumentError struct {
	Tool     string
	Problems []string
}

func (e *ArgumentError) Error() string {
	return fmt.Sprintf("invalid arguments for tool %s: %s", e.Tool, strings.Join(e.Problems, "; "))
}

// Details returns the StandardToolResult error details of e.
func (e *ArgumentError) Details() *ErrorDetails {
	probs := make([]any, len(e.Problems))
	for i, p := range e.Problems {
		probs[i] = p
	}
	return &ErrorDetails{Type: "invalid_arguments", Message: e.Error(),
		Details: map[string]any{"problems": probs}, Recoverable: true}
}

// Option sets a tool's metadata.
type Option func(*Info)

// WithIdempotency sets the tool's idempotency class.
func WithIdempotency(c Idempotency) Option { return func(i *Info) { i.Idempotency = c } }

// WithTimeout bounds each call of the tool.
func WithTimeout(d time.Duration) Option { return func(i *Info) { i.Timeout = d } }

type funcTool[In, Out any] struct {
	info   Info
	schema *node
	flat   *flatDecoder // nil: decode with encoding/json
	fn     func(context.Context, In) (Out, error)
	encode func(Out) (json.RawMessage, error)
}

// Func makes a tool of a typed Go function. The JSON Schema of its
// arguments is derived once from In, which must be a struct: field names
// come from json tags; a field is required unless tagged omitempty or
// omitzero; a `description:"..."` tag describes it and an `enum:"a,b"` tag
// lists the values a string may take. Each call's arguments are checked
// against the schema before fn runs, and a mismatch is an *ArgumentError
// naming each bad field. Out is returned to the model as JSON.
func Func[In, Out any](name, description string, fn func(ctx context.Context, in In) (Out, error), opts ...Option) (Tool, error) {
	if fn == nil {
		return nil, fmt.Errorf("tool %s: nil function", name)
	}
	if !ValidName(name) {
		return nil, fmt.Errorf("%w %q: use 1 to 64 letters, digits, '_' or '-'", ErrInvalidName, name)
	}
	schema, err := deriveSchema(reflect.TypeFor[In]())
	if err != nil {
		return nil, fmt.Errorf("tool %s: %w", name, err)
	}
	t := &funcTool[In, Out]{
		info:   Info{Name: name, Description: description, Parameters: schema.schemaJSON(), Idempotency: NonIdempotent},
		schema: schema,
		flat:   newFlatDecoder(reflect.TypeFor[In](), schema),
		fn:     fn,
		encode: encoderFor[Out](),
	}
	for _, o := range opts {
		o(&t.info)
	}
	if !t.info.Idempotency.Valid() {
		return nil, fmt.Errorf("tool %s: unknown idempotency class %q", name, t.info.Idempotency)
	}
	return t, nil
}

// Must panics if err is not nil and returns t otherwise. It is for tools
// declared at package level.
func Must(t Tool, err error) Tool {
	if err != nil {
		panic(err)
	}
	return t
}

func (t *funcTool[In, Out]) Info() Info { return t.info }

func (t *funcTool[In, Out]) Call(ctx context.Context, args json.RawMessage) (json.RawMessage, error) {
	if len(args) == 0 {
		args = json.RawMessage("{}")
	}
	if !json.Valid(args) {
		return nil, &ArgumentError{Tool: t.info.Name, Problems: []string{"arguments are not valid JSON"}}
	}
	if probs := t.schema.validate(args); len(probs) > 0 {
		return nil, &ArgumentError{Tool: t.info.Name, Problems: probs}
	}
	var in In
	if t.flat != nil {
		if err := t.flat.decode(t.schema, args, reflect.ValueOf(&in).Elem()); err != nil {
			return nil, &ArgumentError{Tool: t.info.Name, Problems: []string{err.Error()}}
		}
	} else if err := json.Unmarshal(args, &in); err != nil {
		return nil, &ArgumentError{Tool: t.info.Name, Problems: []string{decodeProblem(err)}}
	}
	out, err := t.fn(ctx, in)
	if err != nil {
		return nil, err
	}
	return t.encode(out)
}

func decodeProblem(err error) string {
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) && te.Field != "" {
		return fmt.Sprintf("%s: cannot hold %s", te.Field, te.Value)
	}
	return err.Error()
}

// encoderFor picks an encoder for Out once: the common scalar results skip
// encoding/json.
func encoderFor[Out any]() func(Out) (json.RawMessage, error) {
	var zero Out
	switch any(zero).(type) {
	case int:
		return func(v Out) (json.RawMessage, error) { return strconv.AppendInt(nil, int64(any(v).(int)), 10), nil }
	case int64:
		return func(v Out) (json.RawMessage, error) { return strconv.AppendInt(nil, any(v).(int64), 10), nil }
	case bool:
		return func(v Out) (json.RawMessage, error) { return strconv.AppendBool(nil, any(v).(bool)), nil }
	case json.RawMessage:
		return func(v Out) (json.RawMessage, error) {
			r := any(v).(json.RawMessage)
			if r == nil {
				return json.RawMessage("null"), nil
			}
			if !json.Valid(r) {
				return nil, errors.New("tool returned invalid JSON")
			}
			return r, nil
		}
	}
	return func(v Out) (json.RawMessage, error) {
		b, err := json.Marshal(v)
		if err != nil {
			return nil, fmt.Errorf("encoding tool result: %w", err)
		}
		return b, nil
	}
}
