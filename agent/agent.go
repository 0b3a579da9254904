// Package agent runs agents: a Spec (agents as versioned JSON) compiled
// into an Agent, run in Sessions by the plan → act → observe loop, each
// ending in a complete Result with its trace.
package agent

import (
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"strings"
	"time"

	"go.opentelemetry.io/otel/metric"

	"github.com/agentry/agentry/llm"
	"github.com/agentry/agentry/prompt"
	"github.com/agentry/agentry/schema"
	"github.com/agentry/agentry/tool"
)

// Agent is a compiled spec with its model and tools: immutable and safe for
// concurrent use. Each run happens in its own Session.
type Agent struct {
	spec         *Spec
	provider     llm.Provider // wrapped with retries
	providerName string
	model        string // the id the provider is called with
	modelName    string // the model as the spec or --model wrote it
	tools        map[string]*binding
	toolSpecs    []llm.ToolSpec
	inputSchema  *schema.Schema
	prompt       *prompt.AgentPrompt // set when the spec has an output schema
	limits       Limits
	retry        Retry
	pricing      *llm.Pricing
	logger       *slog.Logger
	metrics      *metrics
}

type binding struct {
	tool     tool.Tool
	info     tool.Info
	timeout  time.Duration
	attempts int
	sub      *Agent   // set for agent:NAME tools
	handoff  *handoff // set for transfer_to_NAME tools
}

type options struct {
	provider   *namedProvider
	model      string
	registry   *tool.Registry
	agents     *Dir
	baseDir    string
	pricing    *llm.Pricing
	logger     *slog.Logger
	building   []string // agent names being built, for cycle detection
	middleware func(provider, model string, p llm.Provider) llm.Provider
	meters     metric.MeterProvider
}

// Option configures New.
type Option func(*options)

// WithProvider makes the agent call p instead of opening its model_name.
// name is reported as the provider in results ("" means "custom").
func WithProvider(p llm.Provider, name string) Option {
	return func(o *options) { o.provider = &namedProvider{p: p, name: name} }
}

type namedProvider struct {
	p    llm.Provider
	name string
}

// WithModel replaces the spec's model_name (the CLI's --model).
func WithModel(name string) Option { return func(o *options) { o.model = name } }

// WithTools gives the registry the spec's tools are looked up in.
func WithTools(r *tool.Registry) Option { return func(o *options) { o.registry = r } }

// WithAgents gives the directory "agent:NAME" tools are resolved in.
func WithAgents(d Dir) Option { return func(o *options) { o.agents = &d } }

// WithBaseDir resolves relative paths in model names ("scripted:turns.json")
// against dir.
func WithBaseDir(dir string) Option { return func(o *options) { o.baseDir = dir } }

// WithPricing sets the pricing table (default llm.DefaultPricing()).
func WithPricing(p *llm.Pricing) Option { return func(o *options) { o.pricing = p } }

// WithProviderMiddleware wraps each model provider the agent opens (its
// model and each fallback) before retries are added: a recorder, a
// tracer. Its sub-agents get it too.
func WithProviderMiddleware(mw func(provider, model string, p llm.Provider) llm.Provider) Option {
	return func(o *options) { o.middleware = mw }
}

// WithLogger sets the logger (default slog.Default()).
func WithLogger(l *slog.Logger) Option { return func(o *options) { o.logger = l } }

// New compiles spec into an Agent: it checks the spec, opens the model,
// resolves every tool (an unknown tool is an error naming it) and builds
// sub-agents.
func New(spec *Spec, opts ...Option) (*Agent, error) {
	o := options{}
	for _, opt := range opts {
		opt(&o)
	}
	return build(spec, o)
}

// FromFile loads the spec at path and compiles it, resolving relative
// model paths against the file's directory.
func FromFile(path string, opts ...Option) (*Agent, error) {
	s, err := LoadSpec(path)
	if err != nil {
		return nil, err
	}
	return New(s, append([]Option{WithBaseDir(filepath.Dir(path))}, opts...)...)
}

// FromDir loads ref ("NAME[@VERSION]") from the agents directory dir and
// compiles it; its "agent:" tools resolve in the same directory.
func FromDir(dir, ref string, opts ...Option) (*Agent, error) {
	d := Dir{Path: dir}
	s, path, err := d.Load(ref)
	if err != nil {
		return nil, err
	}
	return New(s, append([]Option{WithAgents(d), WithBaseDir(filepath.Dir(path))}, opts...)...)
}

func build(spec *Spec, o options) (*Agent, error) {
	if spec == nil {
		return nil, errors.New("agent: nil spec")
	}
	if err := spec.Check(); err != nil {
		return nil, err
	}
	for _, n := range o.building {
		if n == spec.AgentName {
			return nil, &SpecError{Source: spec.AgentName, Problems: []string{
				"sub-agent cycle: " + strings.Join(append(o.building, spec.AgentName), " -> ")}}
		}
	}
	a := &Agent{spec: spec, pricing: o.pricing, logger: o.logger,
		limits: mergeLimits(spec.Limits), retry: mergeRetry(spec.Retry), metrics: newMetrics(o.meters)}
	if a.pricing == nil {
		a.pricing = llm.DefaultPricing()
	}
	if a.logger == nil {
		a.logger = slog.Default()
	}
	var problems []string
	if err := a.openModel(o); err != nil {
		problems = append(problems, err.Error())
	}
	if len(spec.InputSchema) > 0 {
		a.inputSchema, _ = schema.Compile(spec.InputSchema) // checked by Check
	}
	if len(spec.OutputSchema) > 0 {
		p, err := prompt.New(prompt.Config{AgentName: spec.AgentName, Version: spec.Version, Mode: string(spec.Mode),
			SystemText: spec.SystemText, PurposeText: spec.PurposeText, OutputSchema: spec.OutputSchema,
			Enums: spec.Enums, Defaults: spec.Defaults, InputKeys: spec.InputKeys})
		if err != nil {
			return nil, &SpecError{Source: spec.AgentName + "@" + spec.Version, Problems: []string{err.Error()}}
		}
		a.prompt = p
	}
	problems = append(problems, a.bindTools(o)...)
	problems = append(problems, a.bindHandoffs(o)...)
	if len(problems) > 0 {
		return nil, &SpecError{Source: spec.AgentName + "@" + spec.Version, Problems: problems}
	}
	return a, nil
}

func (a *Agent) openModel(o options) error {
	model := a.spec.ModelName
	if a.spec.Provider != "" && model != "" && !strings.HasPrefix(model, a.spec.Provider+":") {
		model = a.spec.Provider + ":" + model
	}
	fallbacks := a.spec.FallbackModels
	if a.spec.Mode == ModePlan || a.spec.Mode == ModeService {
		return nil // their work is tools and Go hooks, not a model
	}
	if o.model != "" {
		// --model replaces the model and its fallbacks; its relative paths
		// are the caller's, not the spec file's.
		model, fallbacks = o.model, nil
		o.baseDir = ""
	}
	a.modelName = model
	if o.provider != nil {
		a.providerName = o.provider.name
		if a.providerName == "" {
			a.providerName = "custom"
		}
		_, a.model = llm.ParseModel(model)
		a.provider = llm.WithRetry(a.wrap(o, a.providerName, a.model, o.provider.p), a.retryPolicy())
		return nil
	}
	if model == "" {
		return nil // plan and service modes need no model
	}
	first, err := a.candidate(o, model, a.spec.BaseURL)
	if err != nil {
		return fmt.Errorf("model_name: %v", err)
	}
	a.providerName, a.model = first.Name, first.Model
	if len(fallbacks) == 0 {
		a.provider = first.Provider
		return nil
	}
	cands := []llm.Candidate{first}
	for i, f := range fallbacks {
		name := f.ModelName
		if f.Provider != "" {
			name = f.Provider + ":" + f.ModelName
		}
		c, err := a.candidate(o, name, f.BaseURL)
		if err != nil {
			return fmt.Errorf("fallback_models[%d]: %v", i, err)
		}
		cands = append(cands, c)
	}
	a.provider = llm.NewRouter(cands, llm.RouterOptions{})
	return nil
}

// candidate opens one model, wrapped with the middleware and the agent's
// retries, so that a router falls over only once its retries are spent.
func (a *Agent) candidate(o options, name, baseURL string) (llm.Candidate, error) {
	p, provider, model, err := llm.Open(name, llm.Config{BaseURL: baseURL, Dir: o.baseDir})
	if err != nil {
		return llm.Candidate{}, err
	}
	price, _ := a.pricing.Lookup(model)
	return llm.Candidate{Provider: llm.WithRetry(a.wrap(o, provider, model, p), a.retryPolicy()), Name: provider, Model: model,
		Caps: llm.CapabilitiesOf(provider, model), Price: price}, nil
}

func (a *Agent) wrap(o options, provider, model string, p llm.Provider) llm.Provider {
	if o.middleware == nil {
		return p
	}
	return o.middleware(provider, model, p)
}

func (a *Agent) retryPolicy() llm.RetryPolicy {
	return llm.RetryPolicy{
		Attempts:       a.retry.Attempts,
		InitialBackoff: time.Duration(a.retry.InitialBackoffMS) * time.Millisecond,
		MaxBackoff:     time.Duration(a.retry.MaxBackoffMS) * time.Millisecond,
		Jitter:         0.5,
		AttemptTimeout: time.Duration(a.limits.ModelTimeoutMS) * time.Millisecond,
	}
}

func (a *Agent) bindTools(o options) []string {
	var problems []string
	a.tools = make(map[string]*binding, len(a.spec.Tools))
	for i, name := range a.spec.Tools {
		var b *binding
		if ref, ok := strings.CutPrefix(name, "agent:"); ok {
			sub, err := a.buildSub(ref, o)
			if err != nil {
				problems = append(problems, fmt.Sprintf("tools[%d] %q: %v", i, name, err))
				continue
			}
			b = &binding{tool: subTool{sub}, sub: sub}
		} else {
			var t tool.Tool
			if o.registry != nil {
				t, _ = o.registry.Get(name)
			}
			if t == nil {
				problems = append(problems, fmt.Sprintf("tools[%d]: unknown tool %q%s", i, name, knownTools(o.registry)))
				continue
			}
			b = &binding{tool: t}
		}
		b.info = b.tool.Info()
		if _, dup := a.tools[b.info.Name]; dup {
			problems = append(problems, fmt.Sprintf("tools[%d]: two tools are named %q", i, b.info.Name))
			continue
		}
		b.timeout = a.toolTimeout(b.info)
		b.attempts = a.retry.ToolAttempts
		a.tools[b.info.Name] = b
		a.toolSpecs = append(a.toolSpecs, llm.ToolSpec{Name: b.info.Name, Description: b.info.Description, Parameters: b.info.Parameters})
	}
	for name := range a.limits.ToolTimeoutsMS {
		if _, ok := a.tools[name]; !ok {
			problems = append(problems, fmt.Sprintf("limits.tool_timeouts_ms.%s: the agent has no tool %q", name, name))
		}
	}
	return problems
}

func knownTools(r *tool.Registry) string {
	if r == nil || r.Len() == 0 {
		return " (no tools are registered)"
	}
	return " (known: " + strings.Join(r.Names(), ", ") + ")"
}

// toolTimeout: a per-tool limit of the spec wins, then the tool's own
// timeout, then the spec's tool_timeout_ms.
func (a *Agent) toolTimeout(info tool.Info) time.Duration {
	if ms, ok := a.limits.ToolTimeoutsMS[info.Name]; ok {
		return time.Duration(ms) * time.Millisecond
	}
	if info.Timeout > 0 {
		return info.Timeout
	}
	return time.Duration(a.limits.ToolTimeoutMS) * time.Millisecond
}

func (a *Agent) buildSub(ref string, o options) (*Agent, error) {
	if o.agents == nil {
		return nil, errors.New("no agents directory to resolve it in")
	}
	s, path, err := o.agents.Load(ref)
	if err != nil {
		return nil, err
	}
	so := o
	so.provider, so.model = nil, ""
	so.baseDir = filepath.Dir(path)
	so.building = append(append([]string(nil), o.building...), a.spec.AgentName)
	return build(s, so)
}

// Spec returns the agent's spec. It must not be modified.
func (a *Agent) Spec() *Spec { return a.spec }

// Name returns the agent's name.
func (a *Agent) Name() string { return a.spec.AgentName }

// Limits returns the effective limits (the spec's, with defaults filled in).
func (a *Agent) Limits() Limits { return a.limits }

func mergeLimits(l Limits) Limits {
	d := DefaultLimits
	if l.MaxTurns == 0 {
		l.MaxTurns = d.MaxTurns
	}
	if l.TimeoutMS == 0 {
		l.TimeoutMS = d.TimeoutMS
	}
	if l.ModelTimeoutMS == 0 {
		l.ModelTimeoutMS = d.ModelTimeoutMS
	}
	if l.ToolTimeoutMS == 0 {
		l.ToolTimeoutMS = d.ToolTimeoutMS
	}
	if l.MaxParallelTools == 0 {
		l.MaxParallelTools = d.MaxParallelTools
	}
	return l
}

func mergeRetry(r Retry) Retry {
	d := DefaultRetry
	if r.Attempts == 0 {
		r.Attempts = d.Attempts
	}
	if r.InitialBackoffMS == 0 {
		r.InitialBackoffMS = d.InitialBackoffMS
	}
	if r.MaxBackoffMS == 0 {
		r.MaxBackoffMS = max(d.MaxBackoffMS, r.InitialBackoffMS)
	}
	if r.ToolAttempts == 0 {
		r.ToolAttempts = d.ToolAttempts
	}
	if r.OutputAttempts == 0 {
		r.OutputAttempts = d.OutputAttempts
	}
	return r
}

// subjectSchema is the tool schema of a sub-agent: its input_schema, or
// its input_keys as required strings, or a single "task".
func subjectSchema(s *Spec) json.RawMessage {
	if len(s.InputSchema) > 0 {
		return s.InputSchema
	}
	keys := s.InputKeys
	if len(keys) == 0 {
		keys = []string{"task"}
	}
	props := map[string]any{}
	for _, k := range keys {
		props[k] = map[string]any{"type": "string"}
	}
	b, _ := json.Marshal(map[string]any{"type": "object", "properties": props, "required": keys, "additionalProperties": false})
	return b
}
