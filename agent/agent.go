// Package agent runs agents: a spec (package spec) compiled into an Agent,
// run in Sessions by one small loop. What differs between modes is a
// Planner; what wraps a model call or a tool call is middleware. Every run
// ends in a complete Result with its trace.
//
// A run given a store (WithStore, or a Service with StoreRuns) is
// durable: its log is written as it happens, and Resume rebuilds its
// session from the log after a crash without repeating a non-idempotent
// tool call blindly (docs/durability.md).
package agent

import (
	"bytes"
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel/metric"
	oteltrace "go.opentelemetry.io/otel/trace"

	"github.com/agentry/agentry/llm"
	"github.com/agentry/agentry/memory"
	"github.com/agentry/agentry/policy"
	"github.com/agentry/agentry/prompt"
	"github.com/agentry/agentry/retry"
	"github.com/agentry/agentry/runlog"
	"github.com/agentry/agentry/schema"
	"github.com/agentry/agentry/spec"
	"github.com/agentry/agentry/tool"
)

// Agent is a compiled spec with its model, tools and planner: immutable
// and safe for concurrent use. Each run happens in its own Session.
type Agent struct {
	spec         *spec.Spec     // a private copy, its mode set
	planner      Planner        // from the mode table or WithPlanner
	provider     llm.Provider   // the whole model chain
	models       []llm.Provider // the models in it, as opened
	readiers     []readier      // of them, those Ready asks
	subs         []*Agent       // the sub-agents, which Ready asks too
	providerName string
	model        string                    // the id the provider is called with
	priceModel   string                    // the model prices are looked up for
	modelName    string                    // the model as the spec or --model wrote it
	modelAt      llm.Config                // where modelName is opened: its base URL, its files' directory
	tools        toolTable                 // as built
	live         atomic.Pointer[toolTable] // as its sources' tools changed since (an MCP server's); nil until then
	pinnedIn     sync.Map                  // the stores whose pin of its version matched (pin), each asked once
	started      startFacts                // what its runs' start records say of it, worked out once
	sets         []*toolSet                // the sets of tools its sources gave it (MCP servers, A2A agents)
	setsMu       sync.Mutex                // one refresh of live at a time
	inputSchema  *schema.Schema
	inputLabels  map[string]string   // "input:KEY" for the spec's input keys, made once
	prompt       *prompt.AgentPrompt // set when the spec has an output schema
	limits       spec.Limits
	retry        spec.RetryBudgets
	pricing      *llm.Pricing
	ownPrice     modelPrice     // of the agent's model, looked up once
	logSeal      *runlog.Sealer // seals its stored runs' logs (WithEncryptionKey); nil: none
	window       int            // the model's context window in tokens; 0: unknown
	compaction   string         // spec.CompactDropOldest, CompactSummarize or CompactOff
	keepTurns    int            // the last turns compaction keeps whole
	logger       *slog.Logger
	metrics      *metrics
	candidateMW  []llm.Middleware // what wraps each model: retry, timeout, transport, recover
	policyMW     tool.Middleware  // the spec's policy, shared by its tools
	outFilters   *policy.Filters  // the policy's content filters on the output
	inFilters    *policy.Filters  // on the run's input and its rendered prompt
	redact       *policy.Redactor // what leaves a run (events, logs, the Result, the run log) goes through it
	sizes        *sizes           // shared by the agent's copies (handoffs, sub-agents build their own)
	o            options          // for sub-agents and handoffs built later
	mem          *agentMemory     // the spec's memory; nil without
	sysTpl       *prompt.Template // prompt_ref's template; nil without
	reactTpl     *prompt.Template // a react_template from the prompt store
	closers      []func() error   // what the agent opened: connectors, sub-agents
	handoffs     []*handoff
	subRefused   []string // what its sub-agents' builds refused to create (CreatedBy)
	closeOnce    sync.Once
	closeErr     error
}

// binding is a tool of the agent with its handler chain.
type binding struct {
	info    tool.Info
	tool    tool.Tool
	handler tool.Handler
	inner   tool.Handler // the part of handler inside the run log (Exec)
	label   string       // "tool:NAME", the Result's context_used, made once
	sub     *Agent       // set for agent:NAME tools
	handoff *handoff     // set for transfer_to_NAME tools
	set     *toolSet     // set for a source's tools (an MCP server's)
}

type options struct {
	provider    *namedProvider
	model       string
	registry    *tool.Registry
	used        []tool.Tool
	agents      *spec.Dir
	peers       *Registry // WithRegistry: agents found by name
	outputType  reflect.Type
	baseDir     string
	sources     map[string]tool.Source // WithSource
	pricing     *llm.Pricing
	logger      *slog.Logger
	building    []string // agent names being built, for cycle detection
	providerMW  []llm.Middleware
	transportMW []llm.Middleware
	toolMW      []tool.Middleware
	planner     Planner
	reflector   func(ctx context.Context, t *Turn) (*Final, error)
	service     WorkFunc
	meters      metric.MeterProvider
	tracers     oteltrace.TracerProvider
	rules       []policy.NamedRule
	memory      memory.Backend
	memoryKey   []byte
	prompts     prompt.Store
	creator     *creator // CreatedBy; nil: the host's own agent
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

// WithTools gives the registry the spec's tools are looked up in: what
// the spec may name (as the binary gives its built-in tools).
func WithTools(r *tool.Registry) Option { return func(o *options) { o.registry = r } }

// Use gives the agent tools made in code and offers them to its model,
// as if its spec named them: no registry, no second list of names. A
// tool the spec names too is offered once.
func Use(tools ...tool.Tool) Option { return func(o *options) { o.used = append(o.used, tools...) } }

// WithAgents gives the directory "agent:NAME" tools and handoffs are
// resolved in.
func WithAgents(d spec.Dir) Option { return func(o *options) { o.agents = &d } }

// WithBaseDir resolves relative paths in model names ("scripted:turns.json")
// against dir.
func WithBaseDir(dir string) Option { return func(o *options) { o.baseDir = dir } }

// WithPricing sets the pricing table (default llm.DefaultPricing()); the
// spec's own pricing entries are added to it.
func WithPricing(p *llm.Pricing) Option { return func(o *options) { o.pricing = p } }

// WithProviderMiddleware adds middleware around the agent's model as a
// whole: it sees one call per model turn, after retries and fallback (a
// cache, a run log, a tracer). Calls append; the first is the outermost.
// Sub-agents and handoff targets get it too.
func WithProviderMiddleware(mws ...llm.Middleware) Option {
	return func(o *options) { o.providerMW = append(o.providerMW, mws...) }
}

// WithTransportMiddleware adds middleware around each model the agent
// opens (its model and each fallback), beneath retries: it sees every
// attempt (a recorder, a wire logger). Calls append; the first is the
// outermost.
func WithTransportMiddleware(mws ...llm.Middleware) Option {
	return func(o *options) { o.transportMW = append(o.transportMW, mws...) }
}

// WithToolMiddleware adds middleware around every tool call of the
// agent, outside the built-in retry, timeout, panic recovery and
// truncation. Calls append; the first is the outermost.
func WithToolMiddleware(mws ...tool.Middleware) Option {
	return func(o *options) { o.toolMW = append(o.toolMW, mws...) }
}

// WithRule adds a policy rule of the host's own, asked about every tool
// call after the spec's policy; name identifies it in policy_decision
// events and audit records ("rules.NAME"). Sub-agents the agent builds
// have the rule too.
func WithRule(name string, r policy.Rule) Option {
	return func(o *options) { o.rules = append(slices.Clip(o.rules), policy.NamedRule{Name: name, Rule: r}) }
}

// WithPlanner makes the agent plan with p instead of its mode's planner.
func WithPlanner(p Planner) Option { return func(o *options) { o.planner = p } }

// WithWork sets the Go function that does the work of a service-mode
// agent.
func WithWork(fn WorkFunc) Option { return func(o *options) { o.service = fn } }

// WithLogger sets where the agent logs its runs, turns, model and tool
// calls and failures (see docs/agents.md, "Logs"). The default logs
// nothing: a library speaks when its host asks.
func WithLogger(l *slog.Logger) Option { return func(o *options) { o.logger = l } }

// New compiles a spec into an Agent: it checks the spec, opens the model,
// resolves every tool (an unknown tool is an error naming it), builds
// sub-agents and picks the planner of the mode. The spec is copied: later
// changes to it do not reach the agent.
func New(s *spec.Spec, opts ...Option) (*Agent, error) {
	o := options{}
	for _, opt := range opts {
		opt(&o)
	}
	return build(s, o)
}

// FromFile loads the spec at path and compiles it, resolving relative
// model paths against the file's directory.
func FromFile(path string, opts ...Option) (*Agent, error) {
	s, err := spec.Load(path)
	if err != nil {
		return nil, withToolProblems(err, s, opts)
	}
	return New(s, append([]Option{WithBaseDir(filepath.Dir(path))}, opts...)...)
}

// FromDir loads ref ("NAME[@VERSION]") from the agents directory dir and
// compiles it; its "agent:" tools resolve in the same directory. A spec
// whose output schema differs from the directory's lock is refused.
func FromDir(dir, ref string, opts ...Option) (*Agent, error) {
	d := spec.Dir{Path: dir}
	s, path, err := d.Load(ref)
	if err != nil {
		return nil, err
	}
	if err := d.CheckLock(s); err != nil {
		return nil, &spec.Error{Source: path, Problems: []string{err.Error()}}
	}
	return New(s, append([]Option{WithAgents(d), WithBaseDir(filepath.Dir(path))}, opts...)...)
}

func build(in *spec.Spec, o options) (*Agent, error) {
	if in == nil {
		return nil, errors.New("agent: nil spec")
	}
	sp, err := ownSpec(in, o)
	if err != nil {
		return nil, err
	}
	schemas, err := sp.Compile() // before the mode's default: mode is required with some fields
	if err != nil {
		return nil, toolProblems(err, sp, o)
	}
	if sp.Mode == "" {
		sp.Mode = spec.ModeTools
	}
	source := sp.AgentName + "@" + sp.Version
	for _, n := range o.building {
		if n == sp.AgentName {
			return nil, &spec.Error{Source: source, Problems: []string{
				"sub-agent cycle: " + strings.Join(append(o.building, sp.AgentName), " -> ")}}
		}
	}
	if err := o.creator.admitSpec(sp); err != nil {
		return nil, err
	}
	a := &Agent{spec: sp, logger: o.logger, redact: policy.Secrets(), limits: sp.Limits.WithDefaults(), retry: sp.Retry.WithDefaults(),
		metrics: newMetrics(o.meters), sizes: &sizes{}, inputSchema: schemas.Input, o: o, inputLabels: inputLabels(sp)}
	a.setDefaults(o)
	var problems []string
	if err := a.openModel(o); err != nil {
		problems = append(problems, err.Error())
	}
	problems = append(problems, a.checkPriced()...)
	if a.logSeal, err = logSealer(o.memoryKey); err != nil {
		problems = append(problems, err.Error())
	}
	a.setContext()
	// The agent's own model as its replies name it and as it is priced
	// (a script stands for the model it names), looked up once.
	a.ownPrice.model = cmp.Or(a.priceModel, a.model)
	a.ownPrice.price, a.ownPrice.ok = a.pricing.Lookup(a.ownPrice.model)
	if probs := a.resolvePrompts(o); len(probs) > 0 {
		return nil, &spec.Error{Source: source, Problems: probs}
	}
	if schemas.Output != nil {
		if err := a.composer(schemas); err != nil {
			return nil, &spec.Error{Source: source, Problems: []string{err.Error()}}
		}
	}
	problems = append(problems, a.openMemory(o)...)
	problems = append(problems, a.bindTools(o)...)
	problems = append(problems, a.bindHandoffs(o)...)
	problems = append(problems, a.bindCallerTools()...)
	problems = append(problems, a.checkPolicy()...)
	if sp.Mode == spec.ModeReAct && sp.Policy != nil && len(sp.Policy.PrivateTools) > 0 {
		problems = append(problems, "policy.private_tools: mode react writes a tool's input into the model's text and shows its output as text, where they cannot be kept out; use mode tools")
	}
	a.outFilters = sp.Policy.Filters(policy.Output)
	a.inFilters = sp.Policy.Filters(policy.Input)
	if err := a.choosePlanner(o); err != nil {
		problems = append(problems, err.Error())
	}
	if err := a.admitTools(); err != nil {
		a.Close()
		return nil, err
	}
	if len(problems) > 0 {
		a.Close() // what was opened before a problem was found
		return nil, &spec.Error{Source: source, Problems: problems}
	}
	a.noteReadiers()
	return a, nil
}

// ownSpec is the agent's own copy of in, deep (changing in later changes
// no run), with what the options add: an output type's schema, the tools
// given with Use.
func ownSpec(in *spec.Spec, o options) (*spec.Spec, error) {
	sp := in.Clone()
	if o.outputType != nil && len(sp.OutputSchema) == 0 {
		schema, err := outputSchema(o.outputType)
		if err != nil {
			return nil, &spec.Error{Source: sp.AgentName + "@" + sp.Version, Problems: []string{err.Error()}}
		}
		sp.OutputSchema = schema
	}
	for i, t := range o.used {
		if t == nil {
			return nil, &spec.Error{Source: in.AgentName + "@" + in.Version, Problems: []string{fmt.Sprintf("Use: tool %d is nil", i)}}
		}
		if name := t.Info().Name; !slices.Contains(sp.Tools, name) {
			sp.Tools = append(sp.Tools, name) // the spec as it runs, and is stored, names it
		}
	}
	return sp, nil
}

// setDefaults fills in what the spec leaves to the agent: a structured
// mode's temperature, the pricing table, the logger.
func (a *Agent) setDefaults(o options) {
	sp := a.spec
	switch sp.Mode {
	case spec.ModeChooser, spec.ModeWriter, spec.ModeExtractor:
		if sp.Temperature == nil { // one structured call: the same input, the same answer
			zero := 0.0
			sp.Temperature = &zero
		}
	}
	a.pricing = o.pricing
	if a.pricing == nil {
		a.pricing = llm.DefaultPricing()
	}
	if len(sp.Pricing) > 0 {
		a.pricing = a.pricing.With(llm.NewPricing(sp.Pricing))
	}
	if a.logger == nil {
		a.logger = discard
	}
}

// setContext reads the spec's context: how the transcript is compacted,
// and the window when the spec gives it.
func (a *Agent) setContext() {
	a.compaction, a.keepTurns = spec.CompactDropOldest, 2
	if cx := a.spec.Context; cx != nil {
		if cx.Compaction != "" {
			a.compaction = cx.Compaction
		}
		if cx.Window > 0 {
			a.window = cx.Window
		}
		if cx.KeepTurns > 0 {
			a.keepTurns = cx.KeepTurns
		}
	}
}

// composer makes the neutral AgentPrompt of an agent with an output
// schema.
func (a *Agent) composer(schemas *spec.Schemas) error {
	sp := a.spec
	system := sp.SystemText
	if t := a.sysTpl; t != nil {
		if t.Engine != "" && t.Engine != prompt.FString {
			return fmt.Errorf("prompt_ref %s: mode %s composes its prompt from ${var} text: the template's engine must be fstring, not %s", t.Ref(), sp.Mode, t.Engine)
		}
		system = t.Text
	}
	p, err := prompt.New(prompt.Config{AgentName: sp.AgentName, Version: sp.Version, Mode: string(sp.Mode),
		SystemText: system, PurposeText: sp.PurposeText, OutputSchema: sp.OutputSchema, Schema: schemas.Output,
		Enums: sp.Enums, Defaults: sp.Defaults, InputKeys: sp.InputKeys})
	if err != nil {
		return err
	}
	a.prompt = p
	return nil
}

// inputLabels are the context_used labels of the input keys a spec
// names or its texts use, made once for every run.
func inputLabels(sp *spec.Spec) map[string]string {
	out := map[string]string{}
	keys := slices.Concat(sp.InputKeys, prompt.Vars(sp.SystemText), prompt.Vars(sp.PurposeText), prompt.Vars(sp.UserText))
	for _, k := range keys {
		out[k] = "input:" + k
	}
	return out
}

// Close releases what the agent's connectors hold open (a SQL
// connector's database pool), its sub-agents' and the agents it handed
// off to. Call it when no run of the agent is going on; a tool of a
// closed connector fails. Close is safe to call more than once, and
// agents whose connectors hold nothing need not be closed.
func (a *Agent) Close() error {
	a.closeOnce.Do(func() {
		var errs []error
		for _, h := range a.handoffs {
			if t := h.close(); t != nil {
				errs = append(errs, t.Close())
			}
		}
		for _, c := range a.closers {
			errs = append(errs, c())
		}
		a.closeErr = errors.Join(errs...)
	})
	return a.closeErr
}

func (a *Agent) retryPolicy() retry.Policy {
	return retry.Policy{
		Attempts:       a.retry.Attempts,
		InitialBackoff: time.Duration(a.retry.InitialBackoffMS) * time.Millisecond,
		MaxBackoff:     time.Duration(a.retry.MaxBackoffMS) * time.Millisecond,
		Jitter:         0.5,
	}
}

// toolRetryPolicy is the model's policy with a tool's tries.
func (a *Agent) toolRetryPolicy(name string) retry.Policy {
	p := a.retryPolicy()
	p.Attempts = a.retry.ToolTries(name)
	return p
}

// buildSub is the sub-agent ref names: a registered one (not owned), or
// one built from the agents directory (owned: closed with a).
func (a *Agent) buildSub(ref string, o options) (sub *Agent, owned bool, err error) {
	if r := o.lookup(ref); r != nil {
		return r, false, nil
	}
	if o.agents == nil {
		return nil, false, errors.New("no registered agent and no agents directory to resolve it in")
	}
	s, path, err := o.agents.Load(ref)
	if err != nil {
		return nil, false, err
	}
	so := o
	so.provider, so.model, so.planner, so.service, so.reflector = nil, "", nil, nil, nil
	so.baseDir = filepath.Dir(path)
	so.building = append(append([]string(nil), o.building...), a.spec.AgentName)
	sub, err = build(s, so)
	return sub, err == nil, err
}

// Spec returns a copy of the agent's spec: changing it changes nothing
// in the agent.
func (a *Agent) Spec() spec.Spec { return *a.spec.Clone() }

// WithOutputSchema returns an agent as a whose answers must match schema
// (validated and corrected as the spec's output rules say): for a caller
// that asks a run of an agent without an output schema for structured
// output (OpenAI's response_format). It is built anew from a's spec and
// options, its tools opened again, its version a's with the schema's
// digest after "-schema."; the caller closes it. An agent that
// has an output schema of its own keeps it: a different one is an error.
func (a *Agent) WithOutputSchema(schema json.RawMessage) (*Agent, error) {
	if len(a.spec.OutputSchema) > 0 {
		return nil, fmt.Errorf("%w: agent %s has an output schema of its own", ErrConfig, a.spec.AgentName)
	}
	sp := a.spec.Clone()
	sp.OutputSchema = bytes.Clone(schema)
	// Another schema is another agent: its version says so (the store
	// pins a version's schema), "v1-schema.1a2b3c4d".
	sum := sha256.Sum256(schema)
	sp.Version += "-schema." + hex.EncodeToString(sum[:4])
	return build(sp, a.o)
}

// WithCallerTools returns an agent as a whose model may also call
// tools, the caller's (the spec's caller_tools, after a's own): a run
// hands each call of one back and pauses until resumed with its result
// (CallerResult). For a caller over a protocol that brings tools of its
// own (OpenAI's tools). It is built anew from a's spec and options, its
// tools opened again, its version a's with the tools' digest after
// "-tools."; the caller closes it. A run stored by it resumes with the
// agent Stored builds, which has them.
func (a *Agent) WithCallerTools(tools ...llm.ToolSpec) (*Agent, error) {
	sp := a.spec.Clone()
	sp.CallerTools = append(sp.CallerTools, tools...)
	b, err := json.Marshal(sp.CallerTools)
	if err != nil {
		return nil, fmt.Errorf("%w: caller tools: %v", ErrConfig, err)
	}
	sum := sha256.Sum256(b)
	sp.Version += "-tools." + hex.EncodeToString(sum[:4])
	if err := sp.Check(); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrConfig, err)
	}
	return build(sp, a.o)
}

// UsesModel reports whether name names the model the agent runs: its
// model_name, or the same model written another way (a scripted model's
// file by another path, a relative one read from the working
// directory).
func (a *Agent) UsesModel(name string) bool {
	if name == a.modelName {
		return true
	}
	return a.modelName != "" && llm.Resolve(name, llm.Config{BaseURL: a.modelAt.BaseURL}) == llm.Resolve(a.modelName, a.modelAt)
}

// Name returns the agent's name.
func (a *Agent) Name() string { return a.spec.AgentName }

// Tools describes the tools the agent offers its model now, in the order
// it offers them.
func (a *Agent) Tools() []tool.Info {
	t := a.table()
	out := make([]tool.Info, 0, len(t.specs))
	for _, ts := range t.specs {
		out = append(out, t.byName[ts.Name].info)
	}
	return out
}

// Mode returns the agent's mode.
func (a *Agent) Mode() spec.Mode { return a.spec.Mode }

// Limits returns the effective limits (the spec's, with defaults filled in).
func (a *Agent) Limits() spec.Limits { return a.limits }
