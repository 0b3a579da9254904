package spec

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/agentry/agentry/llm"
	"github.com/agentry/agentry/prompt"
	"github.com/agentry/agentry/schema"
	"github.com/agentry/agentry/tool"
)

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
// tool registry, as a *Error. It does not change the spec.
func (s *Spec) Check() error {
	_, err := s.Compile()
	return err
}

// Schemas are a spec's input and output schemas, compiled; either may be
// nil when the spec has none.
type Schemas struct {
	Input, Output *schema.Schema
}

// Compile checks the spec as Check does and returns its schemas, compiled
// once, for the runtime to use.
func (s *Spec) Compile() (*Schemas, error) {
	var c checker
	var sc Schemas
	s.checkIdentity(&c)
	s.checkModel(&c)
	s.checkMode(&c)
	s.checkIO(&c, &sc)
	c.p = append(c.p, s.checkEnums()...)
	s.checkMCP(&c)
	s.checkA2A(&c)
	s.checkTools(&c)
	s.checkVars(&c, sc.Input)
	if s.Memory != nil {
		s.Memory.check(&c)
	}
	c.p = append(c.p, s.Limits.check()...)
	c.p = append(c.p, s.Retry.check()...)
	if cx := s.Context; cx != nil {
		switch cx.Compaction {
		case "", CompactDropOldest, CompactSummarize, CompactOff:
		default:
			c.bad("context.compaction %q: want drop_oldest, summarize or off", cx.Compaction)
		}
		if cx.Window < 0 || cx.Window > 0 && cx.Window < 256 {
			c.bad("context.window %d: want 0 (the model's) or at least 256 tokens", cx.Window)
		}
		if cx.KeepTurns < 0 {
			c.bad("context.keep_turns %d is negative", cx.KeepTurns)
		}
		if h := cx.History; h != nil && h.MaxMessages < 0 {
			c.bad("context.history.max_messages %d is negative", h.MaxMessages)
		}
	}
	if t := s.Tracing; t != nil && t.SampleRate != nil && (*t.SampleRate < 0 || *t.SampleRate > 1) {
		c.bad("tracing.sample_rate %v is outside 0..1", *t.SampleRate)
	}
	if len(c.p) > 0 {
		return nil, &Error{Problems: c.p}
	}
	return &sc, nil
}

// mode is the spec's mode, ModeTools when unset.
func (s *Spec) mode() Mode {
	if s.Mode == "" {
		return ModeTools
	}
	return s.Mode
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
		if _, _, err := prompt.ParseRef(s.PromptRef); err != nil {
			c.bad("prompt_ref %q: want id or id@version (%v)", s.PromptRef, err)
		}
		if s.SystemText != "" {
			c.bad("prompt_ref and system_text both give the system prompt; keep one")
		}
	}
	if p := s.Policy; p != nil {
		for _, prob := range p.Check() {
			c.bad("policy.%s", prob)
		}
	}
}

func (s *Spec) checkModel(c *checker) {
	if t := s.Temperature; t != nil && (*t < 0 || *t > 2) {
		c.bad("temperature %v is outside 0..2", *t)
	}
	if t := s.TopP; t != nil && (*t < 0 || *t > 1) {
		c.bad("top_p %v is outside 0..1", *t)
	}
	if s.MaxOutputTokens < 0 {
		c.bad("max_output_tokens %d is negative", s.MaxOutputTokens)
	}
	if p := s.Unlisted(qualify(s.Provider, s.ModelName), s.BaseURL); p != "" {
		c.bad("model_name %s", p)
	}
	if s.OutputName != "" && !ValidName(s.OutputName) {
		c.bad("output_name %q: want a name of letters, digits, '_' and '-'", s.OutputName)
	}
	if ms := s.ModelSelection; ms != nil {
		switch ms.Strategy {
		case "", "priority", "cheapest", "fastest":
		default:
			c.bad("model_selection.strategy %q is not one of priority, cheapest, fastest", ms.Strategy)
		}
		if ms.MaxPromptPrice < 0 || ms.MaxCompletionPrice < 0 {
			c.bad("model_selection: a price ceiling is negative")
		}
	}
	for i, f := range s.FallbackModels {
		if f.ModelName == "" {
			c.bad("fallback_models[%d].model_name is required", i)
		}
		if p := s.Unlisted(qualify(f.Provider, f.ModelName), f.BaseURL); p != "" {
			c.bad("fallback_models[%d].model_name %s", i, p)
		}
	}
}

// Unlisted says what is wrong with a model name its provider's catalog
// does not have (a misspelling, or a model newer than this release), ""
// when nothing is: the catalog has it, the provider keeps none, the
// model is served at a base_url of the spec's, or the spec says its
// models are unlisted on purpose (model_unlisted). The providers must be
// linked for their catalogs to be asked.
func (s *Spec) Unlisted(name, baseURL string) string {
	if name == "" || baseURL != "" || s.ModelUnlisted {
		return ""
	}
	if p, unknown := llm.Unknown(name); unknown {
		return fmt.Sprintf("%q: %s's catalog does not have this model (misspelt? for a fine-tuned id or a model newer than this release, set \"model_unlisted\": true)", name, p)
	}
	return ""
}

func (s *Spec) checkMode(c *checker) {
	if s.Mode == "" {
		var stack []string
		if s.PurposeText != "" {
			stack = append(stack, "purpose_text")
		}
		if len(s.Enums) > 0 {
			stack = append(stack, "enums")
		}
		if len(stack) > 0 {
			c.bad("mode is required with %s (the Agent Stack's fields): chooser, writer or extractor for one structured call, or tools or react for an agent that uses tools", strings.Join(stack, " and "))
		}
	}
	mode := s.mode()
	if !slices.Contains(modes, mode) {
		c.bad("mode %q is not one of tools, react, chooser, writer, extractor, plan, service", mode)
	}
	switch mode {
	case ModeChooser, ModeWriter, ModeExtractor:
		if len(s.OutputSchema) == 0 {
			c.bad("mode %s needs an output_schema", mode)
		}
		if s.SystemText == "" && s.PromptRef == "" {
			c.bad("mode %s needs system_text (or a prompt_ref)", mode)
		}
		if s.PurposeText == "" {
			c.bad("mode %s needs purpose_text", mode)
		}
		if len(s.Tools) > 0 {
			c.bad("tools: mode %s makes one model call and uses no tools", mode)
		}
	}
	if mode == ModeChooser && len(s.Enums) == 0 && !strings.Contains(string(s.OutputSchema), `"enum"`) {
		c.bad("mode chooser needs enums (or enum lists in output_schema) to choose from")
	}
	if len(s.Handoffs) > 0 && mode != ModeTools {
		c.bad("handoffs work in mode tools only")
	}
	for i, h := range s.Handoffs {
		if name, _ := ParseRef(h); !ValidName(name) || name == s.AgentName {
			c.bad("handoffs[%d] %q: name another agent", i, h)
		}
	}
	if s.ReActTemplate != "" && mode != ModeReAct {
		c.bad("react_template is only used in mode react")
	}
}

func (s *Spec) checkIO(c *checker, sc *Schemas) {
	for i, m := range s.Messages {
		switch {
		case m.Role != llm.RoleUser && m.Role != llm.RoleAssistant:
			c.bad("messages[%d].role %q: an initial message is user or assistant", i, m.Role)
		case m.Content == "" && len(m.ToolCalls) == 0:
			c.bad("messages[%d] has no content", i)
		case len(m.ToolCalls) > 0:
			c.bad("messages[%d]: an initial message carries no tool calls (their results would be missing)", i)
		}
	}
	for i, k := range s.InputKeys {
		if k == "" {
			c.bad("input_keys[%d] is empty", i)
		} else if slices.Index(s.InputKeys, k) != i {
			c.bad("input_keys[%d] %q is listed twice", i, k)
		}
	}
	if len(s.InputSchema) > 0 {
		var err error
		if sc.Input, err = schema.Compile(s.InputSchema); err != nil {
			c.bad("input_schema: %v", err)
		}
	}
	if len(s.OutputSchema) > 0 {
		var err error
		if sc.Output, err = schema.Compile(s.OutputSchema); err != nil {
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
		} else if server, tn, ok := ParseMCPTool(name); ok {
			s.checkMCPTool(c, i, name, server, tn)
		} else if u, ok := strings.CutPrefix(name, "a2a:"); ok {
			if err := CheckA2AURL(u); err != nil {
				c.bad("tools[%d] %q: %v", i, name, err)
			}
		} else if tool.SchemeOf(name) != "" {
			// Another source's entry: its package, when linked, reads it.
		} else if !tool.ValidName(name) {
			c.bad("tools[%d] %q is not a valid tool name", i, name)
		}
		if slices.Index(s.Tools, name) != i {
			c.bad("tools[%d] %q is listed twice", i, name)
		}
	}
	s.checkCallerTools(c)
}

// checkCallerTools checks the tools the caller runs: named as tools are,
// once each and apart from the agent's own, their parameters a schema
// of an object, in a mode whose model calls tools.
func (s *Spec) checkCallerTools(c *checker) {
	if (len(s.CallerTools) > 0 || s.TakesTools()) && s.mode() != ModeTools && s.mode() != ModeReAct {
		c.bad("caller_tools, callers.tools: mode %s calls no tools (tools or react do)", s.mode())
	}
	for i, t := range s.CallerTools {
		switch {
		case !tool.ValidName(t.Name):
			c.bad("caller_tools[%d] %q is not a valid tool name", i, t.Name)
		case slices.Contains(s.Tools, t.Name):
			c.bad("caller_tools[%d] %q is one of the agent's tools too", i, t.Name)
		case slices.IndexFunc(s.CallerTools, func(o llm.ToolSpec) bool { return o.Name == t.Name }) != i:
			c.bad("caller_tools[%d] %q is listed twice", i, t.Name)
		}
		if len(t.Parameters) > 0 {
			var obj map[string]any
			if json.Unmarshal(t.Parameters, &obj) != nil {
				c.bad("caller_tools[%d] %q: parameters is not a JSON object (a JSON Schema of the arguments)", i, t.Name)
			}
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
	neg("max_observation_bytes", int64(l.MaxObservationBytes))
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
	negp := func(name string, v *int) {
		if v != nil {
			neg(name, int64(*v))
		}
	}
	negp("max_retries", r.MaxRetries)
	negp("attempts", r.Attempts)
	neg("initial_backoff_ms", r.InitialBackoffMS)
	neg("max_backoff_ms", r.MaxBackoffMS)
	negp("tool_max_retries", r.ToolMaxRetries)
	negp("tool_attempts", r.ToolAttempts)
	negp("output_attempts", r.OutputAttempts)
	if r.MaxRetries != nil && r.Attempts != nil {
		p = append(p, fmt.Sprintf("retry: give max_retries (retries after the first try) or attempts (tries in all), not both: max_retries %d is attempts %d", *r.MaxRetries, *r.MaxRetries+1))
	}
	if r.ToolMaxRetries != nil && r.ToolAttempts != nil {
		p = append(p, "retry: give tool_max_retries (retries after the first try) or tool_attempts (tries in all), not both")
	}
	for name, t := range r.Tools {
		negp("tools."+name+".max_retries", t.MaxRetries)
	}
	if r.MaxBackoffMS > 0 && r.InitialBackoffMS > r.MaxBackoffMS {
		p = append(p, fmt.Sprintf("retry.initial_backoff_ms %d exceeds max_backoff_ms %d", r.InitialBackoffMS, r.MaxBackoffMS))
	}
	return p
}

// checkEnums checks that enums and output_schema agree, both ways.
func (s *Spec) checkEnums() []string {
	var p []string
	sch := enumSchemaOf(s.OutputSchema)
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
	if len(s.Enums) > 0 {
		for _, f := range sch.fields() {
			if _, ok := s.Enums[f]; !ok {
				p = append(p, fmt.Sprintf("output_schema.properties.%s has an enum that enums does not list", f))
			}
		}
	}
	for _, f := range slices.Sorted(maps.Keys(s.Defaults)) {
		if len(s.OutputSchema) == 0 || sch.Properties == nil {
			continue
		}
		prop, ok := sch.Properties[f]
		if !ok {
			p = append(p, fmt.Sprintf("defaults.%s: output_schema has no property %q", f, f))
			continue
		}
		allowed := prop.Enum
		if e, listed := s.Enums[f]; listed {
			allowed = make([]any, len(e))
			for i, v := range e {
				allowed[i] = v
			}
		}
		if allowed != nil && !slices.ContainsFunc(allowed, func(v any) bool { return sameJSON(v, s.Defaults[f]) }) {
			p = append(p, fmt.Sprintf("defaults.%s %v is not one of its enum %v", f, s.Defaults[f], allowed))
		}
	}
	return p
}

// enumSchema is what the enum checks read of an output schema: its
// properties' enums, or their items' enums.
type enumSchema struct {
	Properties map[string]struct {
		Enum  []any `json:"enum"`
		Items *struct {
			Enum []any `json:"enum"`
		} `json:"items"`
	} `json:"properties"`
}

// enumSchemaOf reads an output schema for its enums; none when it has
// none, or does not read (Check reports that).
func enumSchemaOf(schema json.RawMessage) enumSchema {
	var sch enumSchema
	if len(schema) > 0 {
		_ = json.Unmarshal(schema, &sch)
	}
	return sch
}

// fields are the properties that hold an enum (or whose items do),
// sorted.
func (sch enumSchema) fields() []string {
	var out []string
	for f, p := range sch.Properties {
		if p.Enum != nil || p.Items != nil && p.Items.Enum != nil {
			out = append(out, f)
		}
	}
	slices.Sort(out)
	return out
}

// sameValues says an enums list and a schema's enum hold the same values,
// in any order (a set: the order of choices means nothing).
func sameValues(a []string, b []any) bool {
	if len(a) != len(b) {
		return false
	}
	for _, v := range b {
		if s, ok := v.(string); !ok || !slices.Contains(a, s) {
			return false
		}
	}
	for i, v := range a {
		if slices.Index(a, v) != i {
			return false // a repeated choice
		}
	}
	return true
}

// sameJSON says two values are equal as JSON.
func sameJSON(a, b any) bool {
	x, err1 := json.Marshal(a)
	y, err2 := json.Marshal(b)
	return err1 == nil && err2 == nil && string(x) == string(y)
}

// checkVars reports a ${var} of the prompts that no declared input
// provides, when the spec declares its input (input_keys or the
// properties of input_schema). Without a declaration any key may come.
func (s *Spec) checkVars(c *checker, in *schema.Schema) {
	declared := map[string]bool{}
	for _, k := range s.InputKeys {
		declared[k] = true
	}
	if len(s.InputSchema) > 0 {
		var sch struct {
			Properties map[string]json.RawMessage `json:"properties"`
		}
		if json.Unmarshal(s.InputSchema, &sch) != nil || in == nil || len(sch.Properties) == 0 {
			return // no properties declared: any key may come
		}
		for k := range sch.Properties {
			declared[k] = true
		}
	} else if len(s.InputKeys) == 0 {
		return
	}
	fields := []struct{ name, text string }{
		{"system_text", s.SystemText}, {"purpose_text", s.PurposeText}, {"user_text", s.UserText}}
	for i, m := range s.Messages {
		fields = append(fields, struct{ name, text string }{fmt.Sprintf("messages[%d]", i), m.Content})
	}
	if m := s.Memory; m != nil {
		fields = append(fields, struct{ name, text string }{"memory.stream", m.Stream})
		for i, c := range m.Collections {
			fields = append(fields, struct{ name, text string }{fmt.Sprintf("memory.collections[%d]", i), c})
		}
	}
	for _, f := range fields {
		for _, v := range prompt.Vars(f.text) {
			// The memory's ${user_id} is the run's user, not an input key.
			if !declared[v] && !(v == "user_id" && strings.HasPrefix(f.name, "memory.")) {
				c.bad("%s uses ${%s}, which no input key provides (declared: %s)", f.name, v, strings.Join(sortedKeys(declared), ", "))
			}
		}
	}
}

func sortedKeys(m map[string]bool) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// qualify is a model as llm.Open reads it: "provider:model" when the
// spec names the provider on its own ("" stays "").
func qualify(provider, model string) string {
	if provider == "" || model == "" || strings.HasPrefix(model, provider+":") {
		return model
	}
	return provider + ":" + model
}
