package tool

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/agentry/agentry/schema"
)

type rawTool struct {
	info   Info
	schema *schema.Schema
	fn     func(context.Context, json.RawMessage) (json.RawMessage, error)
}

// New makes a tool of a function that takes and returns raw JSON. When
// info.Parameters is set it is compiled once as a JSON Schema and every
// call's arguments are validated against it before fn runs. An empty
// Idempotency means NonIdempotent.
func New(info Info, fn func(ctx context.Context, args json.RawMessage) (json.RawMessage, error)) (Tool, error) {
	if fn == nil {
		return nil, fmt.Errorf("tool %s: nil function", info.Name)
	}
	if !ValidName(info.Name) {
		return nil, fmt.Errorf("%w %q: use 1 to 64 letters, digits, '_' or '-'", ErrInvalidName, info.Name)
	}
	if info.Idempotency == "" {
		info.Idempotency = IdempotencyOf(info.Risk)
	}
	if info.Risk != "" && !info.Risk.Valid() {
		return nil, fmt.Errorf("tool %s: unknown risk level %q (low, medium, high or critical)", info.Name, info.Risk)
	}
	if !info.Idempotency.Valid() {
		return nil, fmt.Errorf("tool %s: unknown idempotency class %q", info.Name, info.Idempotency)
	}
	t := &rawTool{info: info, fn: fn}
	if len(info.Parameters) > 0 {
		s, err := schema.Compile(info.Parameters)
		if err != nil {
			return nil, fmt.Errorf("tool %s: parameters: %w", info.Name, err)
		}
		t.schema = s
	} else {
		t.info.Parameters = json.RawMessage(`{"type":"object"}`)
	}
	return t, nil
}

func (t *rawTool) Info() Info { return t.info }

func (t *rawTool) Call(ctx context.Context, args json.RawMessage) (json.RawMessage, error) {
	if len(args) == 0 {
		args = json.RawMessage("{}")
	}
	if t.schema != nil {
		if probs := problems(t.schema, args); len(probs) > 0 {
			return nil, &ArgumentError{Tool: t.info.Name, Problems: probs}
		}
	} else if !json.Valid(args) {
		return nil, &ArgumentError{Tool: t.info.Name, Problems: []string{"arguments are not valid JSON"}}
	}
	return t.fn(ctx, args)
}
