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

	"github.com/google/jsonschema-go/jsonschema"
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

// Option configures a tool made by Func.
type Option func(*funcConfig)

type funcConfig struct {
	info     Info
	schema   *jsonschema.Schema
	examples []any
}

// WithIdempotency sets the tool's idempotency class.
func WithIdempotency(c Idempotency) Option { return func(c2 *funcConfig) { c2.info.Idempotency = c } }

// WithRisk sets the tool's risk level, from which its idempotency class
// is inferred unless WithIdempotency gives one.
func WithRisk(r Risk) Option { return func(c *funcConfig) { c.info.Risk = r } }

// WithDeduplication declares that the tool deduplicates calls by their
// idempotency key (Info.Deduplicates).
func WithDeduplication() Option { return func(c *funcConfig) { c.info.Deduplicates = true } }

// WithExamples gives arguments of good calls (Info.Examples), as values
// that encode to JSON objects; each must be valid against the tool's
// schema.
func WithExamples(args ...any) Option {
	return func(c *funcConfig) { c.examples = append(c.examples, args...) }
}

// WithDependsOn declares the tools whose results a call of this one
// needs (Info.DependsOn): in a turn that calls both, it runs after them.
func WithDependsOn(tools ...string) Option {
	return func(c *funcConfig) { c.info.DependsOn = append(c.info.DependsOn, tools...) }
}

// WithTimeout bounds each call of the tool.
func WithTimeout(d time.Duration) Option { return func(c *funcConfig) { c.info.Timeout = d } }

// WithSchema gives the arguments' JSON Schema instead of the one derived
// from the input type; start from SchemaFor to keep what the type says
// and add what it cannot (an enum, a pattern, a range). Its type must be
// "object", and In must decode what it accepts.
func WithSchema(s *jsonschema.Schema) Option { return func(c *funcConfig) { c.schema = s } }

type funcTool[In, Out any] struct {
	info   Info
	args   argSchema
	flat   *flatDecoder // nil: decode with encoding/json
	fn     func(context.Context, In) (Out, error)
	encode func(Out) (json.RawMessage, error)
}

// Func makes a tool of a typed Go function. The JSON Schema of its
// arguments is derived once from In, which must be a struct, as SchemaFor
// describes: property names from json tags, a field required unless
// tagged omitempty or omitzero, a `jsonschema:"..."` tag as its
// description. Each call's arguments are validated against the schema
// (JSON Schema draft 2020-12) before fn runs, and a mismatch is an
// *ArgumentError naming each bad field. An integer field takes 1.0 or 1e2,
// as the schema does. Out is returned to the model as JSON.
func Func[In, Out any](name, description string, fn func(ctx context.Context, in In) (Out, error), opts ...Option) (Tool, error) {
	if fn == nil {
		return nil, fmt.Errorf("tool %s: nil function", name)
	}
	if !ValidName(name) {
		return nil, fmt.Errorf("%w %q: use 1 to 64 letters, digits, '_' or '-'", ErrInvalidName, name)
	}
	c := funcConfig{info: Info{Name: name, Description: description}}
	for _, o := range opts {
		o(&c)
	}
	if c.info.Risk != "" && !c.info.Risk.Valid() {
		return nil, fmt.Errorf("tool %s: unknown risk level %q (low, medium, high or critical)", name, c.info.Risk)
	}
	if c.info.Idempotency == "" {
		c.info.Idempotency = IdempotencyOf(c.info.Risk) // NonIdempotent without a risk
	}
	if !c.info.Idempotency.Valid() {
		return nil, fmt.Errorf("tool %s: unknown idempotency class %q", name, c.info.Idempotency)
	}
	if c.schema == nil {
		s, err := deriveSchema(reflect.TypeFor[In]())
		if err != nil {
			return nil, fmt.Errorf("tool %s: %w", name, err)
		}
		c.schema = s
	}
	args, err := compileArgs(c.schema)
	if err != nil {
		return nil, fmt.Errorf("tool %s: %w", name, err)
	}
	c.info.Parameters = args.raw
	for i, ex := range c.examples {
		b, err := json.Marshal(ex)
		if err != nil {
			return nil, fmt.Errorf("tool %s: examples[%d]: %w", name, i, err)
		}
		if probs := args.validate(b); len(probs) > 0 {
			return nil, fmt.Errorf("tool %s: examples[%d] %s does not fit the tool's schema: %s", name, i, b, strings.Join(probs, "; "))
		}
		c.info.Examples = append(c.info.Examples, b)
	}
	return &funcTool[In, Out]{
		info:   c.info,
		args:   args,
		flat:   newFlatDecoder(reflect.TypeFor[In]()),
		fn:     fn,
		encode: encoderFor[Out](),
	}, nil
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
	if probs := t.args.validate(args); len(probs) > 0 {
		return nil, &ArgumentError{Tool: t.info.Name, Problems: probs}
	}
	var in In
	if t.flat != nil {
		if err := t.flat.decode(args, reflect.ValueOf(&in).Elem()); err != nil {
			return nil, &ArgumentError{Tool: t.info.Name, Problems: []string{err.Error()}}
		}
	} else if err := json.Unmarshal(args, &in); err != nil {
		// An integer written 1.0 is valid but encoding/json will not put
		// it in an int: write it as one and try again.
		c, changed := canonicalInts(args)
		if in = *new(In); !changed || json.Unmarshal(c, &in) != nil {
			return nil, &ArgumentError{Tool: t.info.Name, Problems: []string{decodeProblem(err)}}
		}
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
