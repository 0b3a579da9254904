// Package spec is agents as data: the versioned JSON spec of an agent,
// its strict loading and checks, the agents directory
// laid out as {agent_name}/{version}.json, and the lock of output-schema
// hashes. It knows nothing of running agents.
package spec

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"strings"

	"github.com/agentry/agentry/internal/strictjson"
	"github.com/agentry/agentry/llm"
	"github.com/agentry/agentry/policy"
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

// modes lists the modes a spec may name, the default first.
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

// NeedsModel reports whether agents of the mode call a model: plan and
// service agents do their work with tools and Go code.
func (m Mode) NeedsModel() bool { return m != ModePlan && m != ModeService }

// Spec is an agent as data: the JSON docs/agents.md describes. A RAGstream
// AgentConfig is a valid Spec.
type Spec struct {
	AgentName   string `json:"agent_name"`
	Version     string `json:"version"`
	Description string `json:"description,omitempty"`
	// Mode is one of the Mode constants; empty means ModeTools.
	Mode Mode `json:"mode,omitempty"`

	// ModelName is "gpt-4.1-mini", "claude-…", "ft:…", or
	// "provider:model" such as "scripted:turns.json".
	ModelName       string     `json:"model_name,omitempty"`
	Provider        string     `json:"provider,omitempty"`
	BaseURL         string     `json:"base_url,omitempty"`
	Temperature     *float64   `json:"temperature,omitempty"`
	TopP            *float64   `json:"top_p,omitempty"`
	MaxOutputTokens int        `json:"max_output_tokens,omitempty"`
	FallbackModels  []ModelRef `json:"fallback_models,omitempty"`
	// ModelSelection picks among the model and its fallbacks for each
	// request: by a strategy, under a price ceiling (the AI Agent
	// Proposal's provider selection). Nil: the first that serves.
	ModelSelection *ModelSelection `json:"model_selection,omitempty"`
	// ModelUnlisted says the models are not in their providers' catalogs
	// on purpose (a fine-tuned id, a model newer than this release): a
	// name a catalog lacks is otherwise refused as misspelt. A model with
	// a base_url (a server of one's own) is never looked up.
	ModelUnlisted bool `json:"model_unlisted,omitempty"`

	// SystemText and PurposeText make the system prompt; UserText, when
	// set, is the first user message. All three take ${var} from the input.
	SystemText  string `json:"system_text,omitempty"`
	PurposeText string `json:"purpose_text,omitempty"`
	UserText    string `json:"user_text,omitempty"`
	PromptRef   string `json:"prompt_ref,omitempty"`

	InputKeys   []string        `json:"input_keys,omitempty"`
	InputSchema json.RawMessage `json:"input_schema,omitempty"`

	OutputSchema json.RawMessage `json:"output_schema,omitempty"`
	// OutputName names the agent's output (the beans seed's outputName):
	// the Result says it (output_name), a pipeline stage's output is
	// kept under it unless the stage gives an output_key, and a parent
	// calling the agent as a sub-agent gets {"NAME": output}.
	OutputName string              `json:"output_name,omitempty"`
	Enums      map[string][]string `json:"enums,omitempty"`
	Defaults   map[string]any      `json:"defaults,omitempty"`

	// Tools names tools of the registry; "agent:NAME" makes another agent
	// a tool; "mcp:SERVER/TOOL" and "mcp:SERVER/*" take tools from an MCP
	// server of MCPServers.
	Tools []string `json:"tools,omitempty"`
	// MCPServers are the MCP servers whose tools the agent may use.
	MCPServers []MCPServer `json:"mcp_servers,omitempty"`
	// A2AAgents give the "a2a:URL" tools entries their headers (the
	// remote agents' credentials).
	A2AAgents []A2AAgent `json:"a2a_agents,omitempty"`
	// Handoffs name agents ("NAME[@VERSION]") this one may pass the
	// conversation and control to, through a transfer_to_NAME tool.
	Handoffs []string          `json:"handoffs,omitempty"`
	FewShot  []json.RawMessage `json:"few_shot,omitempty"`
	// Messages are a conversation the agent starts from, in every mode:
	// user and assistant messages put after the system prompt and before
	// the task, their ${var}s filled from the input (the beans seed's
	// initial messages).
	Messages []llm.Message `json:"messages,omitempty"`
	// FewShotEnabled turns the few-shot examples (few_shot and a prompt
	// template's) on or off; nil is on (Noema's fewShotExamples).
	FewShotEnabled *bool `json:"few_shot_enabled,omitempty"`
	// ReActTemplate picks the version of the ReAct system prompt template
	// ("" for the newest).
	ReActTemplate string `json:"react_template,omitempty"`
	// Pricing prices models this spec uses that the built-in table does
	// not know, per million tokens: {"my-model": {"prompt": 0.2,
	// "completion": 0.8}}.
	Pricing map[string]llm.Price `json:"pricing,omitempty"`
	Limits  Limits               `json:"limits,omitzero"`
	Retry   Retry                `json:"retry,omitzero"`
	// Policy is what the agent may do (package policy).
	Policy *policy.Policy `json:"policy,omitempty"`
	// Memory is what the agent remembers across runs.
	Memory *Memory `json:"memory,omitempty"`
	// Seed makes runs' randomness (retry jitter) derive from it. Run ids
	// stay unique; a caller's seed (agentry run --seed, agent.WithSeed)
	// makes them deterministic too.
	Seed *int64 `json:"seed,omitempty"`
	// Context says how a transcript that nears the model's context window
	// is compacted.
	Context *Context `json:"context,omitempty"`
	// Tracing says whether runs of the agent are recorded (Noema's
	// tracing.enabled and sampleRate): the run store keeps a run only when
	// tracing is on and the run is sampled.
	Tracing *Tracing `json:"tracing,omitempty"`
	// Connectors configure the connectors whose tools the agent may name
	// in Tools (files, shell, sql): each is off until configured here.
	Connectors map[string]json.RawMessage `json:"connectors,omitempty"`
	// Callers says what a caller of the agent over a protocol (OpenAI's
	// chat completions, say) may add to a run; nil: nothing.
	Callers *Callers `json:"callers,omitempty"`
	// CallerTools are tools the caller runs, not the agent: the model may
	// call them beside the agent's own, and a run that calls one hands
	// the call back to its caller, pausing until a resume gives its
	// result (agent.CallerResult). A caller that may add tools (Callers.Tools)
	// adds its own here, for its run.
	CallerTools []llm.ToolSpec `json:"caller_tools,omitempty"`
}

// Callers is what callers of an agent may add to its runs. What they may
// not is refused, never dropped.
type Callers struct {
	// Instructions lets a caller's system and developer messages into the
	// run, after the agent's own system prompt (which stands): for an
	// agent a client is trusted to steer.
	Instructions bool `json:"instructions,omitempty"`
	// Tools lets a caller give a run tools of its own (OpenAI's tools,
	// and a tool_choice that forces a call), which the run hands back to
	// it to run (CallerTools): for an agent whose client does part of
	// the work.
	Tools bool `json:"tools,omitempty"`
}

// TakesInstructions says whether callers may give the agent's runs
// instructions of their own (Callers.Instructions).
func (s *Spec) TakesInstructions() bool { return s.Callers != nil && s.Callers.Instructions }

// TakesTools says whether callers may give the agent's runs tools of
// their own (Callers.Tools).
func (s *Spec) TakesTools() bool { return s.Callers != nil && s.Callers.Tools }

// ModelSelection is how the model of a request is picked among the
// spec's model and its fallback_models.
type ModelSelection struct {
	// Strategy orders them: "priority" (the default: as listed),
	// "cheapest" (by price for the request's size), "fastest" (by the
	// latency measured so far; one not measured yet goes first).
	Strategy string `json:"strategy,omitempty"`
	// MaxPromptPrice and MaxCompletionPrice leave out the models that
	// cost more, in USD per million tokens (0: no ceiling). An unpriced
	// model is above any ceiling.
	MaxPromptPrice     float64 `json:"max_prompt_price,omitempty"`
	MaxCompletionPrice float64 `json:"max_completion_price,omitempty"`
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
	// MaxObservationBytes cuts a longer tool result before the model sees
	// it, with a note of how much was dropped; the trace keeps it whole.
	MaxObservationBytes int `json:"max_observation_bytes,omitempty"`
}

// DefaultLimits returns the limits used for the fields a spec leaves at
// zero: a fresh value, so no caller changes another's defaults.
func DefaultLimits() Limits { return defaultLimits }

var defaultLimits = Limits{
	MaxTurns:            10,
	TimeoutMS:           300_000,
	ModelTimeoutMS:      120_000,
	ToolTimeoutMS:       60_000,
	MaxParallelTools:    8,
	MaxObservationBytes: 64 << 10,
}

// WithDefaults returns l with DefaultLimits in the fields left at zero.
func (l Limits) WithDefaults() Limits {
	d := defaultLimits
	setDefault(&l.MaxTurns, d.MaxTurns)
	setDefault(&l.TimeoutMS, d.TimeoutMS)
	setDefault(&l.ModelTimeoutMS, d.ModelTimeoutMS)
	setDefault(&l.ToolTimeoutMS, d.ToolTimeoutMS)
	setDefault(&l.MaxParallelTools, d.MaxParallelTools)
	setDefault(&l.MaxObservationBytes, d.MaxObservationBytes)
	return l
}

func setDefault[T int | int64](v *T, d T) {
	if *v == 0 {
		*v = d
	}
}

// Retry holds the three retry budgets, kept apart: model calls that fail in
// transport, tool calls that fail transiently (safe and idempotent tools
// only), and final answers that fail output validation. A field left out
// (nil) takes its default; 0 means 0: one try, no correction.
type Retry struct {
	// MaxRetries is how many times a model call that failed in transport
	// is tried again (default 3: four tries at most; 0: no retry).
	MaxRetries *int `json:"max_retries,omitempty"`
	// Attempts is the older spelling of MaxRetries, counting tries: 3
	// tries is max_retries 2. Give one or the other.
	Attempts         *int  `json:"attempts,omitempty"`
	InitialBackoffMS int64 `json:"initial_backoff_ms,omitempty"`
	MaxBackoffMS     int64 `json:"max_backoff_ms,omitempty"`
	// ToolMaxRetries is how many times a safe or idempotent tool call
	// that failed transiently is tried again (default 0).
	ToolMaxRetries *int `json:"tool_max_retries,omitempty"`
	// ToolAttempts is the older spelling of ToolMaxRetries, counting
	// tries.
	ToolAttempts *int `json:"tool_attempts,omitempty"`
	// OutputAttempts is how many times an invalid final answer is sent
	// back for correction (default 2; 0: never).
	OutputAttempts *int `json:"output_attempts,omitempty"`
	// Tools sets a tool's retries and whether its failure ends the run,
	// by tool name.
	Tools map[string]ToolRetry `json:"tools,omitempty"`
}

// ToolRetry is how one tool's failures are handled.
type ToolRetry struct {
	// MaxRetries replaces tool_max_retries for this tool (still only for
	// safe and idempotent tools, and transient failures).
	MaxRetries *int `json:"max_retries,omitempty"`
	// Fatal ends the run with the tool's error (tool_error) when a call
	// fails after its retries, instead of showing the model the error.
	Fatal bool `json:"fatal,omitempty"`
}

// The compaction strategies of Context.
const (
	// CompactDropOldest replaces the oldest tool observations with a
	// note, then drops the oldest whole turns: the default.
	CompactDropOldest = "drop_oldest"
	// CompactSummarize replaces the older turns with a summary the model
	// writes.
	CompactSummarize = "summarize"
	// CompactOff never compacts: a transcript too long ends the run.
	CompactOff = "off"
)

// Context is how a run keeps its transcript within the model's context
// window.
type Context struct {
	// Compaction is drop_oldest (default), summarize or off.
	Compaction string `json:"compaction,omitempty"`
	// Window is the context window in tokens, for a model whose window
	// agentry does not know (or to keep runs smaller); 0 takes the
	// model's, or learns it from the provider's context-length error.
	Window int `json:"window,omitempty"`
	// KeepTurns is how many of the last turns stay whole (default 2).
	KeepTurns int `json:"keep_turns,omitempty"`
	// History is what a run in a conversation carries of the runs before
	// it; nil carries all of it.
	History *History `json:"history,omitempty"`
}

// History is what a run in a conversation carries of the runs before it:
// their tasks and answers, and by default their tool calls and results.
type History struct {
	// Tools false leaves the earlier runs' tool calls and results out
	// (their tasks and answers stay); nil or true carries them.
	Tools *bool `json:"tools,omitempty"`
	// MaxMessages carries at most the newest this many messages (a whole
	// tool call with its results, or none of it); 0 carries all.
	MaxMessages int `json:"max_messages,omitempty"`
}

// Tracing is whether and how often runs are recorded.
type Tracing struct {
	// Enabled false records no run (default true).
	Enabled *bool `json:"enabled,omitempty"`
	// SampleRate is the share of runs recorded, 0 to 1 (default 1). The
	// choice is the run's trace id's (or run id's) hash: the same trace
	// is recorded or not in every agent that samples at the same rate.
	SampleRate *float64 `json:"sample_rate,omitempty"`
}

// Records says whether a run with that trace (or run) id is recorded.
func (t *Tracing) Records(id string) bool {
	if t == nil {
		return true
	}
	if t.Enabled != nil && !*t.Enabled {
		return false
	}
	if t.SampleRate == nil || *t.SampleRate >= 1 {
		return true
	}
	sum := sha256.Sum256([]byte(id)) // well spread, even for ids one digit apart
	return float64(binary.BigEndian.Uint64(sum[:8])>>11)/(1<<53) < *t.SampleRate
}

// RetryBudgets are the retry settings with every default applied.
type RetryBudgets struct {
	// Attempts and ToolAttempts count tries: retries plus one.
	Attempts, ToolAttempts, OutputAttempts int
	InitialBackoffMS, MaxBackoffMS         int64
	// Tools are the per-tool settings, as the spec gives them.
	Tools map[string]ToolRetry
}

// DefaultRetryBudgets returns what a spec's retry fields default to: a
// model call is retried 3 times (the beans seed), a tool call not at all.
// It is a function, not a variable, so that no caller can change the
// defaults of every agent in the process.
func DefaultRetryBudgets() RetryBudgets {
	return RetryBudgets{Attempts: 4, InitialBackoffMS: 500, MaxBackoffMS: 20_000, ToolAttempts: 1, OutputAttempts: 2}
}

// ToolTries is how many times a tool is tried at most.
func (b RetryBudgets) ToolTries(name string) int {
	if t, ok := b.Tools[name]; ok && t.MaxRetries != nil {
		return max(*t.MaxRetries, 0) + 1
	}
	return b.ToolAttempts
}

// Fatal says a failed call of the tool ends the run.
func (b RetryBudgets) Fatal(name string) bool { return b.Tools[name].Fatal }

// WithDefaults returns the budgets r sets, DefaultRetryBudgets for the
// rest.
func (r Retry) WithDefaults() RetryBudgets {
	b := DefaultRetryBudgets()
	b.Tools = r.Tools
	switch {
	case r.MaxRetries != nil:
		b.Attempts = max(*r.MaxRetries, 0) + 1
	case r.Attempts != nil:
		b.Attempts = max(*r.Attempts, 1)
	}
	switch {
	case r.ToolMaxRetries != nil:
		b.ToolAttempts = max(*r.ToolMaxRetries, 0) + 1
	case r.ToolAttempts != nil:
		b.ToolAttempts = max(*r.ToolAttempts, 1)
	}
	if r.OutputAttempts != nil {
		b.OutputAttempts = *r.OutputAttempts
	}
	if r.InitialBackoffMS > 0 {
		b.InitialBackoffMS = r.InitialBackoffMS
	}
	if r.MaxBackoffMS > 0 {
		b.MaxBackoffMS = r.MaxBackoffMS
	} else {
		b.MaxBackoffMS = max(b.MaxBackoffMS, b.InitialBackoffMS)
	}
	return b
}

// Error lists what is wrong with a spec.
type Error struct {
	// Source is the file or reference the spec came from.
	Source   string
	Problems []string
	// unreadable says the file could not be read as a spec at all
	// (malformed JSON, an unknown field): its problems are critical.
	unreadable bool
}

// Severity is how much a validation issue matters (the jeeves seed's
// ValidationSeverity).
type Severity string

// The severities.
const (
	// SeverityCritical: the spec cannot be read at all.
	SeverityCritical Severity = "critical"
	// SeverityError: the spec reads, but an agent cannot be built from it.
	SeverityError Severity = "error"
	// SeverityWarning: it builds and runs, but likely not as meant.
	SeverityWarning Severity = "warning"
)

// Issue is one problem of a spec, with its severity.
type Issue struct {
	Severity Severity `json:"severity"`
	Message  string   `json:"message"`
}

// Issues are e's problems with their severity: critical when the spec
// could not be read, errors otherwise.
func (e *Error) Issues() []Issue {
	sev := SeverityError
	if e.unreadable {
		sev = SeverityCritical
	}
	out := make([]Issue, len(e.Problems))
	for i, p := range e.Problems {
		out[i] = Issue{Severity: sev, Message: p}
	}
	return out
}

// Warnings are what a valid spec holds that likely is not meant: a
// limit another makes unreachable, or "model_unlisted" where every model
// is listed (the check it turns off would pass, and a later misspelling
// would go unnoticed). The providers must be linked for their catalogs
// to be asked.
func (s *Spec) Warnings() []Issue {
	var out []Issue
	warn := func(format string, a ...any) {
		out = append(out, Issue{Severity: SeverityWarning, Message: fmt.Sprintf(format, a...)})
	}
	l := s.Limits
	if l.TimeoutMS > 0 {
		if l.ToolTimeoutMS > l.TimeoutMS {
			warn("limits.tool_timeout_ms %d is longer than limits.timeout_ms %d: no tool call can use it", l.ToolTimeoutMS, l.TimeoutMS)
		}
		if l.ModelTimeoutMS > l.TimeoutMS {
			warn("limits.model_timeout_ms %d is longer than limits.timeout_ms %d: no model call can use it", l.ModelTimeoutMS, l.TimeoutMS)
		}
	}
	if len(s.Enums) == 0 {
		// With enums given, a schema enum they leave out is an error
		// (checkEnums); without any, a warning: a writer may keep its
		// schema's enums to itself, and the Agent Stack asks for each.
		for _, f := range enumSchemaOf(s.OutputSchema).fields() {
			warn("output_schema.properties.%s has an enum that enums does not list (the Agent Stack's enums name every enum field)", f)
		}
	}
	if s.ModelUnlisted && s.ModelName != "" {
		probe := *s
		probe.ModelUnlisted = false
		unlisted := probe.Unlisted(qualify(s.Provider, s.ModelName), s.BaseURL) != ""
		for _, f := range s.FallbackModels {
			unlisted = unlisted || probe.Unlisted(qualify(f.Provider, f.ModelName), f.BaseURL) != ""
		}
		if !unlisted {
			warn("model_unlisted is set, but every model is in its provider's catalog: a later misspelling would go unnoticed")
		}
	}
	return out
}

func (e *Error) Error() string {
	src := e.Source
	if src == "" {
		src = "agent spec"
	}
	return src + ": " + strings.Join(e.Problems, "; ")
}

// Is makes errors.Is(err, ErrInvalid) true.
func (e *Error) Is(target error) bool { return target == ErrInvalid }

// Clone returns a deep copy of s: changing one changes nothing in the
// other (maps, slices and schemas included).
func (s *Spec) Clone() *Spec {
	if s == nil {
		return nil
	}
	b, err := json.Marshal(s)
	var c Spec
	if err == nil {
		err = json.Unmarshal(b, &c)
	}
	if err != nil { // a value in Defaults that JSON cannot hold: copy what can be
		c = *s
		c.Enums, c.Defaults = maps.Clone(s.Enums), maps.Clone(s.Defaults)
	}
	c.Policy = s.Policy.Clone()
	return &c
}

// Parse decodes and checks a spec; source names it in errors. An absent
// mode becomes ModeTools. With problems, the *Error lists them all (an
// unknown field does not hide the rest) and the spec is returned as far
// as it reads, for a checker to go on to what only a built agent knows
// (its tools); it is nil when the data does not read as a spec at all.
func Parse(source string, data []byte) (*Spec, error) {
	var s Spec
	if err := strictjson.Decode(data, &s); err != nil {
		var uf *strictjson.UnknownFieldError
		if !errors.As(err, &uf) || json.Unmarshal(data, &s) != nil {
			return nil, &Error{Source: source, Problems: []string{err.Error()}, unreadable: true}
		}
		// Unknown fields do not hide the rest: the spec is read without
		// them and checked, and every problem is reported at once.
		probs := problemsOf(err)
		var se *Error
		if errors.As(s.Check(), &se) {
			probs = append(probs, se.Problems...)
		}
		return &s, &Error{Source: source, Problems: probs}
	}
	if err := s.Check(); err != nil { // before the mode's default: mode is required with some fields
		var se *Error
		if errors.As(err, &se) {
			se.Source = source
		}
		return &s, err
	}
	if s.Mode == "" {
		s.Mode = ModeTools
	}
	return &s, nil
}

// Load reads and checks the spec file at path, as Parse does.
func Load(path string) (*Spec, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, &Error{Source: path, Problems: []string{err.Error()}}
	}
	return Parse(path, data)
}

// problemsOf is each error err joins, as a problem.
func problemsOf(err error) []string {
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		var out []string
		for _, e := range j.Unwrap() {
			out = append(out, e.Error())
		}
		return out
	}
	return []string{err.Error()}
}
