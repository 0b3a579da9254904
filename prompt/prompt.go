// Package prompt composes model prompts from agent configuration: the
// neutral AgentPrompt of the RAGstream Agent Stack (Chooser, Writer and
// Extractor agents) and the versioned ReAct template of the Noema spec.
//
// Composition is deterministic and stateless: the same configuration and
// input give the same messages, byte for byte.
package prompt

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/agentry/agentry/llm"
	"github.com/agentry/agentry/schema"
)

// Modes of an AgentPrompt.
const (
	Chooser   = "chooser"
	Writer    = "writer"
	Extractor = "extractor"
)

// JSONInstruction closes the system message of every composed prompt.
const JSONInstruction = "Return only a JSON object that matches this JSON schema, with no other text:"

// ClosingSentence ends the user message of every composed prompt.
const ClosingSentence = "Reply with a single JSON object only, no extra text, matching the schema."

// Config is an agent's prompt configuration, as its spec gives it.
type Config struct {
	AgentName, Version, Mode string
	SystemText, PurposeText  string
	OutputSchema             json.RawMessage
	Enums                    map[string][]string
	Defaults                 map[string]any
	// InputKeys orders the input lines; other keys follow, sorted.
	InputKeys []string
	// Schema is OutputSchema compiled, when the caller has it already;
	// New compiles it otherwise.
	Schema *schema.Schema
}

// AgentPrompt is the neutral prompt engine: it holds configuration only,
// composes the messages for an input and validates a reply. It knows
// nothing of any particular agent and keeps no per-call state; it is safe
// for concurrent use.
type AgentPrompt struct {
	cfg    Config
	schema *schema.Schema
	fields []field // the output schema's properties, in file order
}

type field struct {
	name, typ, description, format string
	required                       bool
	enum                           []string
}

// New checks cfg and returns its AgentPrompt. The output schema is
// compiled here unless cfg.Schema holds it compiled.
func New(cfg Config) (*AgentPrompt, error) {
	if len(cfg.OutputSchema) == 0 {
		return nil, errors.New("prompt: output_schema is required")
	}
	s := cfg.Schema
	if s == nil {
		var err error
		if s, err = schema.Compile(cfg.OutputSchema); err != nil {
			return nil, fmt.Errorf("prompt: output_schema: %w", err)
		}
	}
	fields, err := schemaFields(cfg.OutputSchema)
	if err != nil {
		return nil, fmt.Errorf("prompt: output_schema: %w", err)
	}
	cfg.Mode = strings.ToLower(cfg.Mode)
	return &AgentPrompt{cfg: cfg, schema: s, fields: fields}, nil
}

// Compose builds the SYSTEM and USER messages for input, and returns the
// output schema as the response format for providers that take one.
// ${var} placeholders in the system and purpose texts are filled from input;
// a missing one is a *MissingVarError.
func (p *AgentPrompt) Compose(input map[string]any) ([]llm.Message, json.RawMessage, error) {
	system, err := Render("system_text", p.cfg.SystemText, input)
	if err != nil {
		return nil, nil, err
	}
	purpose, err := Render("purpose_text", p.cfg.PurposeText, input)
	if err != nil {
		return nil, nil, err
	}
	return []llm.Message{
		{Role: llm.RoleSystem, Content: p.systemText(system, purpose)},
		{Role: llm.RoleUser, Content: p.userText(input)},
	}, p.cfg.OutputSchema, nil
}

func (p *AgentPrompt) systemText(system, purpose string) string {
	var b strings.Builder
	for _, s := range []string{system, purpose} {
		if s = strings.TrimSpace(s); s != "" {
			b.WriteString(s)
			b.WriteString("\n\n")
		}
	}
	fmt.Fprintf(&b, "Agent: %s (version %s)\n\n%s\n", p.cfg.AgentName, p.cfg.Version, JSONInstruction)
	var pretty bytes.Buffer
	if json.Indent(&pretty, p.cfg.OutputSchema, "", "  ") == nil {
		b.Write(pretty.Bytes())
	} else {
		b.Write(p.cfg.OutputSchema)
	}
	return b.String()
}

func (p *AgentPrompt) userText(input map[string]any) string {
	var b strings.Builder
	b.WriteString("Input:\n")
	b.WriteString(InputLines(input, p.cfg.InputKeys))
	b.WriteString("\n\n")
	switch p.cfg.Mode {
	case Chooser:
		for _, f := range p.chooserFields() {
			fmt.Fprintf(&b, "Choose %s from [%s].\n", f.name, quoteList(f.enum))
		}
	case Writer:
		b.WriteString("Fill each field with appropriate text following the purpose:\n")
		p.listFields(&b)
	case Extractor:
		b.WriteString("Extract or map the information in the input into these fields:\n")
		p.listFields(&b)
	default:
		b.WriteString("Fill these fields:\n")
		p.listFields(&b)
	}
	b.WriteString("\n")
	b.WriteString(ClosingSentence)
	return b.String()
}

// chooserFields are the fields of enums, in the schema's order (enums
// without a schema property last, sorted).
func (p *AgentPrompt) chooserFields() []field {
	var out []field
	seen := map[string]bool{}
	for _, f := range p.fields {
		if vals, ok := p.cfg.Enums[f.name]; ok {
			out = append(out, field{name: f.name, enum: vals})
			seen[f.name] = true
		} else if len(p.cfg.Enums) == 0 && len(f.enum) > 0 {
			out = append(out, f)
		}
	}
	for _, k := range slices.Sorted(maps.Keys(p.cfg.Enums)) {
		if !seen[k] && !slices.ContainsFunc(out, func(f field) bool { return f.name == k }) {
			out = append(out, field{name: k, enum: p.cfg.Enums[k]})
		}
	}
	return out
}

func (p *AgentPrompt) listFields(b *strings.Builder) {
	for _, f := range p.fields {
		b.WriteString("- ")
		b.WriteString(f.name)
		var notes []string
		if f.typ != "" {
			notes = append(notes, f.typ)
		}
		if f.format != "" {
			notes = append(notes, "format "+f.format)
		}
		if f.required {
			notes = append(notes, "required")
		}
		if len(notes) > 0 {
			b.WriteString(" (" + strings.Join(notes, ", ") + ")")
		}
		if f.description != "" {
			b.WriteString(": " + f.description)
		}
		if len(f.enum) > 0 {
			b.WriteString(" one of [" + quoteList(f.enum) + "]")
		}
		b.WriteByte('\n')
	}
}

func quoteList(vals []string) string {
	q := make([]string, len(vals))
	for i, v := range vals {
		q[i] = strconv.Quote(v)
	}
	return strings.Join(q, ", ")
}

// InputLines lists an input payload as `key = "value"` lines: keys first
// in the given order, then the others sorted. Strings are quoted; other
// values are written as JSON.
func InputLines(input map[string]any, order []string) string {
	var b []byte
	line := func(k string, v any) {
		if len(b) > 0 {
			b = append(b, '\n')
		}
		b = append(b, k...)
		b = append(b, " = "...)
		if s, ok := v.(string); ok {
			b = strconv.AppendQuote(b, s)
		} else if j, err := json.Marshal(v); err == nil {
			b = append(b, j...)
		} else {
			b = fmt.Append(b, v)
		}
	}
	found := 0
	for i, k := range order {
		if v, ok := input[k]; ok && !slices.Contains(order[:i], k) {
			line(k, v)
			found++
		}
	}
	if found < len(input) {
		var rest []string
		for k := range input {
			if !slices.Contains(order, k) {
				rest = append(rest, k)
			}
		}
		slices.Sort(rest)
		for _, k := range rest {
			line(k, input[k])
		}
	}
	return string(b)
}

// ValidationError is a reply that does not give the output the schema asks
// for; Output holds what could be read of it.
type ValidationError struct {
	Problems []string
	Output   map[string]any
}

func (e *ValidationError) Error() string {
	return "output does not match the schema: " + strings.Join(e.Problems, "; ")
}

// ParseAndValidate turns a raw reply into the output: the JSON object in
// it (bare, fenced or inside prose), with defaults filled in for missing
// fields, valid against the output schema (required fields, types, enums,
// formats). A reply that is not is a *ValidationError naming each problem.
func (p *AgentPrompt) ParseAndValidate(raw string) (map[string]any, error) {
	js, err := schema.ExtractJSON(raw)
	if err != nil {
		return nil, &ValidationError{Problems: []string{err.Error()}}
	}
	v, err := schema.Decode(js)
	if err != nil {
		return nil, &ValidationError{Problems: []string{"reply is not JSON: " + err.Error()}}
	}
	obj, ok := v.(map[string]any)
	if !ok {
		return nil, &ValidationError{Problems: []string{"reply is not a JSON object"}}
	}
	for k, d := range p.cfg.Defaults {
		if _, ok := obj[k]; !ok {
			obj[k] = jsonValue(d)
		}
	}
	if err := p.schema.Validate(obj); err != nil {
		var ve *schema.ValidationError
		if errors.As(err, &ve) {
			return nil, &ValidationError{Problems: ve.Strings(), Output: obj}
		}
		return nil, &ValidationError{Problems: []string{err.Error()}, Output: obj}
	}
	return obj, nil
}

// jsonValue converts a Go value to the form JSON decoding gives.
func jsonValue(v any) any {
	b, err := json.Marshal(v)
	if err != nil {
		return v
	}
	out, err := schema.Decode(b)
	if err != nil {
		return v
	}
	return out
}

// schemaFields lists the top-level properties of a schema in the order the
// file gives them, with their type, description and enum.
func schemaFields(raw json.RawMessage) ([]field, error) {
	var doc struct {
		Properties json.RawMessage `json:"properties"`
		Required   []string        `json:"required"`
	}
	if err := json.Unmarshal(raw, &doc); err != nil {
		return nil, err
	}
	if len(doc.Properties) == 0 {
		return nil, nil
	}
	dec := json.NewDecoder(bytes.NewReader(doc.Properties))
	if _, err := dec.Token(); err != nil { // {
		return nil, err
	}
	var out []field
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil, err
		}
		name, _ := tok.(string)
		var prop struct {
			Type        any    `json:"type"`
			Description string `json:"description"`
			Format      string `json:"format"`
			Enum        []any  `json:"enum"`
			Items       *struct {
				Enum []any `json:"enum"`
			} `json:"items"`
		}
		if err := dec.Decode(&prop); err != nil {
			return nil, err
		}
		f := field{name: name, description: prop.Description, format: prop.Format, required: slices.Contains(doc.Required, name)}
		switch t := prop.Type.(type) {
		case string:
			f.typ = t
		case []any:
			var ts []string
			for _, x := range t {
				ts = append(ts, fmt.Sprint(x))
			}
			f.typ = strings.Join(ts, " or ")
		}
		enum := prop.Enum
		if enum == nil && prop.Items != nil {
			enum = prop.Items.Enum
		}
		for _, e := range enum {
			f.enum = append(f.enum, fmt.Sprint(e))
		}
		out = append(out, f)
	}
	return out, nil
}
