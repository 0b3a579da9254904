package agent

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"

	"github.com/agentry/agentry/internal/strictjson"
	"github.com/agentry/agentry/schema"
	"github.com/agentry/agentry/tool"
)

// Mode selects how an agent works.
type Mode string

// The modes. Tools is the default.
const (
	ModeTools     Mode = "tools"
	ModeReAct     Mode = "react"
	ModeChooser   Mode = "chooser"
	ModeWriter    Mode = "writer"
	ModeExtractor Mode = "extractor"
	ModePlan      Mode = "plan"
	ModeService   Mode = "service"
)

var modes = []Mode{ModeTools, ModeReAct, ModeChooser, ModeWriter, ModeExtractor, ModePlan, ModeService}

// UnmarshalJSON accepts a mode in any letter case ("Chooser" = "chooser").
func (m *Mode) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return errors.New("mode must be a string")
	}
	*m = Mode(strings.ToLower(s))
	return nil
}

// Spec is an agent as data: the JSON of DESIGN.md 3.1. A RAGstream
// AgentConfig is a valid Spec.
type Spec struct {
	AgentName   string `json:"agent_name"`
	Version     string `json:"version"`
	Description string `json:"description,omitempty"`
	Mode        Mode   `json:"mode,omitempty"`

	// ModelName is "gpt-4.1-mini", "claude-…", "ft:…", or
	// "provider:model" such as "scripted:turns.json".
	ModelName       string     `json:"model_name,omitempty"`
	Provider        string     `json:"provider,omitempty"`
	BaseURL         string     `json:"base_url,omitempty"`
	Temperature     *float64   `json:"temperature,omitempty"`
	TopP            *float64   `json:"top_p,omitempty"`
	MaxOutputTokens int        `json:"max_output_tokens,omitempty"`
	FallbackModels  []ModelRef `json:"fallback_models,omitempty"`

	// SystemText and PurposeText make the system prompt; UserText, when
	// set, is the first user message. All three take ${var} from the input.
	SystemText  string `json:"system_text,omitempty"`
	PurposeText string `json:"purpose_text,omitempty"`
	UserText    string `json:"user_text,omitempty"`
	PromptRef   string `json:"prompt_ref,omitempty"`

	InputKeys   []string        `json:"input_keys,omitempty"`
	InputSchema json.RawMessage `json:"input_schema,omitempty"`

	OutputSchema json.RawMessage     `json:"output_schema,omitempty"`
	Enums        map[string][]string `json:"enums,omitempty"`
	Defaults     map[string]any      `json:"defaults,omitempty"`

	// Tools names tools of the registry; "agent:NAME" makes another agent
	// a tool.
	Tools []string `json:"tools,omitempty"`
	// Handoffs name agents ("NAME[@VERSION]") this one may pass the
	// conversation and control to, through a transfer_to_NAME tool.
	Handoffs []string          `json:"handoffs,omitempty"`
	FewShot  []json.RawMessage `json:"few_shot,omitempty"`
	// ReActTemplate picks the version of the ReAct system prompt template
	// ("" for the newest).
	ReActTemplate string          `json:"react_template,omitempty"`
	Limits        Limits          `json:"limits,omitzero"`
	Retry         Retry           `json:"retry,omitzero"`
	Policy        json.RawMessage `json:"policy,omitempty"`
}

// ModelRef is a fallback model.
type ModelRef struct {
	ModelName string `json:"model_name"`
	Provider  string `json:"provider,omitempty"`
	BaseURL   string `json:"base_url,omitempty"`
}

// Limits bound a run. Every field is optional; zero means the default
// (see DefaultLimits) or, for budgets, no limit.
type Limits struct {
	MaxTurns       int   `json:"max_turns,omitempty"`
	TimeoutMS      int64 `json:"timeout_ms,omitempty"`
	ModelTimeoutMS int64 `json:"model_timeout_ms,omitempty"`
	ToolTimeoutMS  int64 `json:"tool_timeout_ms,omitempty"`
	// ToolTimeoutsMS overrides the tool timeout per tool name.
	ToolTimeoutsMS   map[string]int64 `json:"tool_timeouts_ms,omitempty"`
	MaxToolCalls     int              `json:"max_tool_calls,omitempty"`
	MaxTotalTokens   int              `json:"max_total_tokens,omitempty"`
	MaxCostUSD       float64          `json:"max_cost_usd,omitempty"`
	MaxParallelTools int              `json:"max_parallel_tools,omitempty"`
}

// DefaultLimits are used for the fields a spec leaves at zero.
var DefaultLimits = Limits{
	MaxTurns:         10,
	TimeoutMS:        300_000,
	ModelTimeoutMS:   120_000,
	ToolTimeoutMS:    60_000,
	MaxParallelTools: 8,
}

// Retry holds the three retry budgets, kept apart: model calls that fail in
// transport, tool calls that fail transiently (safe and idempotent tools
// only), and final answers that fail output validation.
type Retry struct {
	// Attempts is the number of tries of each model call (default 3).
	Attempts         int   `json:"attempts,omitempty"`
	InitialBackoffMS int64 `json:"initial_backoff_ms,omitempty"`
	MaxBackoffMS     int64 `json:"max_backoff_ms,omitempty"`
	// ToolAttempts is the number of tries of a failing safe or idempotent
	// tool call (default 1: no retry).
	ToolAttempts int `json:"tool_attempts,omitempty"`
	// OutputAttempts is how many times an invalid final answer is sent
	// back for correction (default 2).
	OutputAttempts int `json:"output_attempts,omitempty"`
}

// DefaultRetry is used for the fields a spec leaves at zero.
var DefaultRetry = Retry{Attempts: 3, InitialBackoffMS: 500, MaxBackoffMS: 20_000, ToolAttempts: 1, OutputAttempts: 2}

// SpecError lists what is wrong with a spec.
type SpecError struct {
	// Source is the file or reference the spec came from.
	Source   string
	Problems []string
}

func (e *SpecError) Error() string {
	src := e.Source
	if src == "" {
		src = "agent spec"
	}
	return src + ": " + strings.Join(e.Problems, "; ")
}

// ErrInvalidSpec is matched by every *SpecError: errors.Is(err, ErrInvalidSpec).
var ErrInvalidSpec = errors.New("invalid agent spec")

// Is makes errors.Is(err, ErrInvalidSpec) true.
func (e *SpecError) Is(target error) bool { return target == ErrInvalidSpec }

// ParseSpec decodes and checks a spec. source names it in errors.
func ParseSpec(source string, data []byte) (*Spec, error) {
	var s Spec
	if err := strictjson.Decode(data, &s); err != nil {
		return nil, &SpecError{Source: source, Problems: []string{err.Error()}}
	}
	if err := s.Check(); err != nil {
		var se *SpecError
		if errors.As(err, &se) {
			se.Source = source
		}
		return nil, err
	}
	return &s, nil
}

// LoadSpec reads and checks the spec file at path.
func LoadSpec(path string) (*Spec, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, &SpecError{Source: path, Problems: []string{err.Error()}}
	}
	return ParseSpec(path, data)
}

// ValidName reports whether s can be an agent name: 1 to 64 letters,
// digits, '_' or '-' (it names a directory and, as a sub-agent, a tool).
func ValidName(s string) bool { return tool.ValidName(s) }

// ValidVersion reports whether s can be a version: 1 to 64 letters, digits,
// '.', '_' or '-'.
func ValidVersion(s string) bool {
	if s == "" || len(s) > 64 || s[0] == '.' {
		return false
	}
	for _, c := range s {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == '-') {
			return false
		}
	}
	return true
}

// Check reports everything wrong with the spec that can be known without a
// tool registry, as a *SpecError.
func (s *Spec) Check() error {
	var c checker
	s.checkIdentity(&c)
	s.checkModel(&c)
	s.checkMode(&c)
	s.checkIO(&c)
	c.p = append(c.p, s.checkEnums()...)
	s.checkTools(&c)
	c.p = append(c.p, s.Limits.check()...)
	c.p = append(c.p, s.Retry.check()...)
	if len(c.p) > 0 {
		return &SpecError{Problems: c.p}
	}
	return nil
}

// checker collects problems.
type checker struct{ p []string }

func (c *checker) bad(format string, a ...any) { c.p = append(c.p, fmt.Sprintf(format, a...)) }

func (s *Spec) checkIdentity(c *checker) {
	switch {
	case s.AgentName == "":
		c.bad("agent_name is required")
	case !ValidName(s.AgentName):
		c.bad("agent_name %q: use 1 to 64 letters, digits, '_' or '-'", s.AgentName)
	}
	switch {
	case s.Version == "":
		c.bad("version is required")
	case !ValidVersion(s.Version):
		c.bad("version %q: use 1 to 64 letters, digits, '.', '_' or '-'", s.Version)
	}
	if s.PromptRef != "" {
		c.bad("prompt_ref: the prompt store is not available in this release; use system_text and purpose_text")
	}
	if len(s.Policy) > 0 {
		c.bad("policy: the policy engine is not available in this release; remove the field rather than rely on it")
	}
}

func (s *Spec) checkModel(c *checker) {
	if s.Mode == "" {
		s.Mode = ModeTools
	}
	if s.ModelName == "" && s.Mode != ModePlan && s.Mode != ModeService {
		c.bad("model_name is required for mode %s", s.Mode)
	}
	if t := s.Temperature; t != nil && (*t < 0 || *t > 2) {
		c.bad("temperature %v is outside 0..2", *t)
	}
	if t := s.TopP; t != nil && (*t < 0 || *t > 1) {
		c.bad("top_p %v is outside 0..1", *t)
	}
	if s.MaxOutputTokens < 0 {
		c.bad("max_output_tokens %d is negative", s.MaxOutputTokens)
	}
	for i, f := range s.FallbackModels {
		if f.ModelName == "" {
			c.bad("fallback_models[%d].model_name is required", i)
		}
	}
}

func (s *Spec) checkMode(c *checker) {
	if !slices.Contains(modes, s.Mode) {
		c.bad("mode %q is not one of tools, react, chooser, writer, extractor, plan, service", s.Mode)
	}
	switch s.Mode {
	case ModeChooser, ModeWriter, ModeExtractor:
		if len(s.OutputSchema) == 0 {
			c.bad("mode %s needs an output_schema", s.Mode)
		}
		if len(s.Tools) > 0 {
			c.bad("tools: mode %s makes one model call and uses no tools", s.Mode)
		}
	}
	if s.Mode == ModeChooser && len(s.Enums) == 0 && !strings.Contains(string(s.OutputSchema), `"enum"`) {
		c.bad("mode chooser needs enums (or enum lists in output_schema) to choose from")
	}
	if len(s.Handoffs) > 0 && s.Mode != ModeTools {
		c.bad("handoffs work in mode tools only")
	}
	for i, h := range s.Handoffs {
		if name, _ := ParseRef(h); !ValidName(name) || name == s.AgentName {
			c.bad("handoffs[%d] %q: name another agent", i, h)
		}
	}
	if s.ReActTemplate != "" && s.Mode != ModeReAct {
		c.bad("react_template is only used in mode react")
	}
}

func (s *Spec) checkIO(c *checker) {
	for i, k := range s.InputKeys {
		if k == "" {
			c.bad("input_keys[%d] is empty", i)
		} else if slices.Index(s.InputKeys, k) != i {
			c.bad("input_keys[%d] %q is listed twice", i, k)
		}
	}
	if len(s.InputSchema) > 0 {
		if _, err := schema.Compile(s.InputSchema); err != nil {
			c.bad("input_schema: %v", err)
		}
	}
	if len(s.OutputSchema) > 0 {
		if _, err := schema.Compile(s.OutputSchema); err != nil {
			c.bad("output_schema: %v", err)
		}
	}
}

func (s *Spec) checkTools(c *checker) {
	for i, name := range s.Tools {
		if n, ok := strings.CutPrefix(name, "agent:"); ok {
			ref, _, _ := strings.Cut(n, "@")
			if !ValidName(ref) {
				c.bad("tools[%d] %q: bad agent name", i, name)
			}
		} else if !tool.ValidName(name) {
			c.bad("tools[%d] %q is not a valid tool name", i, name)
		}
		if slices.Index(s.Tools, name) != i {
			c.bad("tools[%d] %q is listed twice", i, name)
		}
	}
}

func (l Limits) check() []string {
	var p []string
	neg := func(name string, v int64) {
		if v < 0 {
			p = append(p, fmt.Sprintf("limits.%s %d is negative", name, v))
		}
	}
	neg("max_turns", int64(l.MaxTurns))
	neg("timeout_ms", l.TimeoutMS)
	neg("model_timeout_ms", l.ModelTimeoutMS)
	neg("tool_timeout_ms", l.ToolTimeoutMS)
	neg("max_tool_calls", int64(l.MaxToolCalls))
	neg("max_total_tokens", int64(l.MaxTotalTokens))
	neg("max_parallel_tools", int64(l.MaxParallelTools))
	if l.MaxCostUSD < 0 {
		p = append(p, fmt.Sprintf("limits.max_cost_usd %v is negative", l.MaxCostUSD))
	}
	for name, v := range l.ToolTimeoutsMS {
		if v <= 0 {
			p = append(p, fmt.Sprintf("limits.tool_timeouts_ms.%s %d must be positive", name, v))
		}
	}
	return p
}

func (r Retry) check() []string {
	var p []string
	neg := func(name string, v int64) {
		if v < 0 {
			p = append(p, fmt.Sprintf("retry.%s %d is negative", name, v))
		}
	}
	neg("attempts", int64(r.Attempts))
	neg("initial_backoff_ms", r.InitialBackoffMS)
	neg("max_backoff_ms", r.MaxBackoffMS)
	neg("tool_attempts", int64(r.ToolAttempts))
	neg("output_attempts", int64(r.OutputAttempts))
	if r.MaxBackoffMS > 0 && r.InitialBackoffMS > r.MaxBackoffMS {
		p = append(p, fmt.Sprintf("retry.initial_backoff_ms %d exceeds max_backoff_ms %d", r.InitialBackoffMS, r.MaxBackoffMS))
	}
	return p
}

// checkEnums checks that enums and output_schema agree, both ways.
func (s *Spec) checkEnums() []string {
	var p []string
	var sch struct {
		Properties map[string]struct {
			Enum  []any `json:"enum"`
			Items *struct {
				Enum []any `json:"enum"`
			} `json:"items"`
		} `json:"properties"`
	}
	if len(s.OutputSchema) > 0 {
		_ = json.Unmarshal(s.OutputSchema, &sch)
	}
	if len(s.Enums) > 0 && len(s.OutputSchema) == 0 {
		return []string{"enums are given but output_schema is missing"}
	}
	names := make([]string, 0, len(s.Enums))
	for f := range s.Enums {
		names = append(names, f)
	}
	slices.Sort(names)
	for _, f := range names {
		prop, ok := sch.Properties[f]
		if !ok {
			p = append(p, fmt.Sprintf("enums.%s: output_schema has no property %q", f, f))
			continue
		}
		want := prop.Enum
		if want == nil && prop.Items != nil {
			want = prop.Items.Enum
		}
		if want != nil && !sameValues(s.Enums[f], want) {
			p = append(p, fmt.Sprintf("enums.%s %v does not match output_schema.properties.%s.enum %v", f, s.Enums[f], f, want))
		}
	}
	props := make([]string, 0, len(sch.Properties))
	for f := range sch.Properties {
		props = append(props, f)
	}
	slices.Sort(props)
	for _, f := range props {
		prop := sch.Properties[f]
		if (prop.Enum != nil || prop.Items != nil && prop.Items.Enum != nil) && len(s.Enums) > 0 {
			if _, ok := s.Enums[f]; !ok {
				p = append(p, fmt.Sprintf("output_schema.properties.%s has an enum that enums does not list", f))
			}
		}
	}
	for f := range s.Defaults {
		if len(s.OutputSchema) > 0 && sch.Properties != nil {
			if _, ok := sch.Properties[f]; !ok {
				p = append(p, fmt.Sprintf("defaults.%s: output_schema has no property %q", f, f))
			}
		}
	}
	return p
}

func sameValues(a []string, b []any) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if s, ok := b[i].(string); !ok || s != a[i] {
			return false
		}
	}
	return true
}
