package pipeline

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"path/filepath"
	"reflect"
	"slices"
	"strings"

	oteltrace "go.opentelemetry.io/otel/trace"

	"github.com/agentry/agentry/agent"
	"github.com/agentry/agentry/event"
	"github.com/agentry/agentry/internal/ids"
	"github.com/agentry/agentry/internal/journal"
	"github.com/agentry/agentry/llm"
	"github.com/agentry/agentry/policy"
	"github.com/agentry/agentry/runlog"
	"github.com/agentry/agentry/spec"
	"github.com/agentry/agentry/store"
	"github.com/agentry/agentry/tool"
)

// Hooks customise a stage, in the manner of the jeeves capability layer.
// Any may be nil.
type Hooks struct {
	// PreProcess runs before the stage's main processing.
	PreProcess func(ctx context.Context, env *Envelope) error
	// PostProcess runs after the output is stored.
	PostProcess func(ctx context.Context, env *Envelope, output map[string]any) error
	// Work does the work of a service-mode stage.
	Work func(ctx context.Context, env *Envelope) (map[string]any, error)
	// Mock replaces the main processing when the pipeline runs with mocks.
	Mock func(ctx context.Context, env *Envelope) (map[string]any, error)
}

// Option configures New.
type Option func(*options)

type options struct {
	tools     *tool.Registry
	agentsDir string
	agentOpts []agent.Option
	hooks     map[string]Hooks
	useMock   bool
	registry  *agent.Registry
	logger    *slog.Logger
	key       []byte
	tracers   oteltrace.TracerProvider
	roles     map[string]string // WithModelRoles
}

// WithModelRoles sets the model of roles, over the definition's
// model_roles: the stages that name a role run its model ("planner":
// "gpt-4.1-mini"). A flag or a server's setting swaps a role's model
// without editing the definition.
func WithModelRoles(roles map[string]string) Option {
	return func(o *options) {
		if o.roles == nil {
			o.roles = map[string]string{}
		}
		maps.Copy(o.roles, roles)
	}
}

// WithTools gives the registry that stage agents and plans use.
func WithTools(r *tool.Registry) Option { return func(o *options) { o.tools = r } }

// WithAgentsDir resolves agent references in dir (instead of the
// definition's agents_dir).
func WithAgentsDir(dir string) Option { return func(o *options) { o.agentsDir = dir } }

// WithRegistry resolves a stage's agent reference ("NAME" or
// "NAME@VERSION") in r first, then in the agents directory: an agent
// built in Go serves as a stage, the same instance, which the pipeline
// does not close. Stage agents find their sub-agents and handoff targets
// in r too (agent.WithRegistry). Without it, the process's default
// registry (agent.DefaultRegistry) serves.
func WithRegistry(r *agent.Registry) Option { return func(o *options) { o.registry = r } }

// WithLogger gives the pipeline a logger: each run logs its start and
// end (info), each stage's start and end and its routing decision
// (debug; a failed stage at warn) and hook failures (warn), every record
// with the pipeline, its version and the run id. Stage agents log through
// their own (agent.WithLogger in WithAgentOptions).
func WithLogger(l *slog.Logger) Option { return func(o *options) { o.logger = l } }

// WithEncryptionKey seals the logs of the pipeline's stored runs (and
// gives its stage agents the key: their memory and logs are sealed too),
// as agent.WithEncryptionKey does; reading a sealed run (Stored) needs it.
func WithEncryptionKey(key []byte) Option {
	return func(o *options) {
		o.key = key
		o.agentOpts = append(o.agentOpts, agent.WithEncryptionKey(key))
	}
}

// WithAgentOptions passes options to every stage agent (pricing, models).
func WithAgentOptions(opts ...agent.Option) Option {
	return func(o *options) { o.agentOpts = append(o.agentOpts, opts...) }
}

// WithHooks sets the hooks of a stage.
func WithHooks(stage string, h Hooks) Option {
	return func(o *options) {
		if o.hooks == nil {
			o.hooks = map[string]Hooks{}
		}
		o.hooks[stage] = h
	}
}

// WithMock makes stages that have a Mock hook use it instead of their
// processing (the seed's UseMock).
func WithMock(use bool) Option { return func(o *options) { o.useMock = use } }

// Pipeline is a compiled definition: every stage's agent built. It is
// immutable and safe for concurrent runs.
type Pipeline struct {
	def       *Definition
	stages    map[string]*stage
	tools     *tool.Registry
	mock      bool
	baseDir   string // what relative paths resolve against
	agentsDir string // where stage agents were found
	red       *policy.Redactor
	logger    *slog.Logger // nil: no records
	tracers   oteltrace.TracerProvider
	seal      *runlog.Sealer // seals its stored runs' logs; nil: none
}

type stage struct {
	def    *Stage
	agent  *agent.Agent
	shared bool   // a registered agent (WithRegistry): not the pipeline's to close
	name   string // the agent's NAME@VERSION
	hooks  Hooks
}

// FromFile loads and compiles the definition at path; relative paths in it
// (agents_dir, scripted models of inline specs) are relative to the file.
func FromFile(path string, opts ...Option) (*Pipeline, error) {
	d, err := Load(path)
	if err != nil {
		return nil, err
	}
	return New(d, filepath.Dir(path), opts...)
}

// New compiles a definition. baseDir resolves its relative paths.
func New(d *Definition, baseDir string, opts ...Option) (*Pipeline, error) {
	var o options
	for _, opt := range opts {
		opt(&o)
	}
	if err := d.Check(); err != nil {
		return nil, err
	}
	dir := o.agentsDir
	if dir == "" && d.AgentsDir != "" {
		dir = filepath.Join(baseDir, d.AgentsDir)
	}
	if dir == "" {
		dir = filepath.Join(baseDir, "agents")
	}
	p := &Pipeline{def: d, stages: map[string]*stage{}, tools: o.tools, mock: o.useMock, baseDir: baseDir, agentsDir: dir,
		red: policy.Secrets(), logger: o.logger, tracers: o.tracers}
	if o.key != nil {
		s, err := runlog.NewSealer(o.key)
		if err != nil {
			return nil, fmt.Errorf("%w: WithEncryptionKey: %v", ErrInvalid, err)
		}
		p.seal = s
	}
	roles := map[string]string{}
	for role, model := range d.ModelRoles {
		// A file a model name holds (scripted:FILE) is the definition's,
		// as an agent's is its spec's; a role given in code is the
		// caller's, as agent.WithModel's is.
		if provider, path := llm.ParseModel(model); provider == "scripted" && !filepath.IsAbs(path) {
			model = provider + ":" + filepath.Join(baseDir, path)
		}
		roles[role] = model
	}
	maps.Copy(roles, o.roles)
	var probs []string
	for i := range d.Stages {
		sd := &d.Stages[i]
		model := ""
		if sd.ModelRole != "" {
			if model = roles[sd.ModelRole]; model == "" {
				probs = append(probs, fmt.Sprintf("stage %s: model_role %q: model_roles gives it no model (roles: %s)", sd.Name, sd.ModelRole,
					strings.Join(slices.Sorted(maps.Keys(roles)), ", ")))
				continue
			}
		}
		st, err := buildStage(sd, dir, baseDir, model, o)
		if err != nil {
			probs = append(probs, fmt.Sprintf("stage %s: %v", sd.Name, err))
			continue
		}
		p.stages[sd.Name] = st
	}
	if len(probs) > 0 {
		p.Close()
		return nil, &DefinitionError{Source: d.PipelineName, Problems: probs}
	}
	return p, nil
}

// Close closes the stages' agents (see agent.Agent.Close): what their
// connectors hold open is released. Call it when no run is going on.
func (p *Pipeline) Close() error {
	var errs []error
	for _, name := range slices.Sorted(maps.Keys(p.stages)) {
		if st := p.stages[name]; !st.shared {
			errs = append(errs, st.agent.Close())
		}
	}
	return errors.Join(errs...)
}

// buildStage builds a stage's agent: its reference in the agents
// directory (or a registered instance), or its inline spec; with model,
// its role's, in place of its spec's.
func buildStage(sd *Stage, agentsDir, baseDir, model string, o options) (*stage, error) {
	base := append([]agent.Option{agent.WithTools(o.tools), agent.WithAgents(spec.Dir{Path: agentsDir})}, o.agentOpts...)
	if o.registry == nil {
		o.registry = agent.DefaultRegistry() // a stage finds its agent there as an agent its sub-agents
	}
	base = append(base, agent.WithRegistry(o.registry))
	if model != "" {
		base = append(base, agent.WithModel(model))
	}
	var a *agent.Agent
	var err error
	shared := false
	if ref, inline := sd.agentRef(); !inline {
		if r, rerr := o.registry.Get(ref); rerr == nil {
			a, shared = r, true
			if model != "" {
				// A role's model is the stage's own: an agent built
				// again from the registered one's spec, with the
				// pipeline's options (a tool given only to that
				// instance in code is not among them).
				sp := r.Spec()
				if a, err = agent.New(&sp, base...); err != nil {
					return nil, fmt.Errorf("model_role %q: %w", sd.ModelRole, err)
				}
				shared = false
			}
		}
		if a == nil {
			a, err = agent.FromDir(agentsDir, ref, base...)
		}
	} else {
		var sp *spec.Spec
		sp, err = sd.inlineSpec()
		if err == nil {
			a, err = agent.New(sp, append([]agent.Option{agent.WithBaseDir(baseDir)}, base...)...)
		}
	}
	if err != nil {
		return nil, err
	}
	sp := a.Spec()
	if sd.OutputKey == "" {
		// The agent's named output is its key, as its definition says
		// (the beans seed's outputName); else the stage's name.
		sd.OutputKey = cmp.Or(sp.OutputName, sd.Name)
	}
	return &stage{def: sd, agent: a, shared: shared, name: sp.AgentName + "@" + sp.Version, hooks: o.hooks[sd.Name]}, nil
}

// Definition returns the pipeline's definition.
func (p *Pipeline) Definition() *Definition { return p.def }

// RunOption configures one run.
type RunOption func(*runConfig)

type runConfig struct {
	onEvent      []listener
	bus          *event.Bus
	sessionOpts  []agent.RunOption
	store        store.Store
	runID        string
	oneStage     bool          // ProcessStage: stop after the first stage
	dispatch     bool          // Dispatch
	driver       string        // Drive
	cont         *continuation // Continue
	badPlan      bool          // Drive was given an agent run's fields
	conversation string        // WithConversation
}

type listener struct {
	fn   func(event.Event)
	opts []event.Option
}

// WithEvents calls fn with each event of the run, the stage agents' too,
// in order, on a goroutine of its own; the options are those of
// event.Bus.Subscribe. Run returns after fn has seen every event.
func WithEvents(fn func(event.Event), opts ...event.Option) RunOption {
	return func(c *runConfig) { c.onEvent = append(c.onEvent, listener{fn, opts}) }
}

// WithEventBus forwards the run's events to b.
func WithEventBus(b *event.Bus) RunOption { return func(c *runConfig) { c.bus = b } }

// WithSessionOptions passes run options to the session of every stage
// agent: the user and correlation ids, the metadata, a budget. Events and
// the parent run id are the pipeline's own and are set after these.
func WithSessionOptions(opts ...agent.RunOption) RunOption {
	return func(c *runConfig) { c.sessionOpts = append(c.sessionOpts, opts...) }
}

// Result is the Result of an agent run, summed over the
// stages, plus the envelope.
type Result struct {
	agent.Result
	Envelope *Envelope `json:"envelope"`
}

// Errors a pipeline run can end with, for errors.Is.
var (
	ErrMaxHops       = errors.New("pipeline: max_hops exceeded")
	ErrRouting       = errors.New("pipeline: routing failed")
	ErrMissingOutput = errors.New("pipeline: required output field missing")
	ErrHook          = errors.New("pipeline: hook failed")
	ErrStageFailed   = errors.New("pipeline: stage failed")
	ErrNotPaused     = errors.New("pipeline: the envelope is not waiting for input")
	ErrWrongPipeline = errors.New("pipeline: the envelope belongs to another pipeline")
	// ErrInvalid is matched by every *DefinitionError.
	ErrInvalid = errors.New("invalid pipeline definition")
)

// Run runs the pipeline on input from its start stage.
func (p *Pipeline) Run(ctx context.Context, input map[string]any, opts ...RunOption) (*Result, error) {
	if input == nil {
		input = map[string]any{}
	}
	env := &Envelope{Format: EnvelopeFormat, Pipeline: p.def.PipelineName, RawInput: input, // its id is the run's to give
		Outputs: map[string]map[string]any{}, Metadata: map[string]any{}, History: []StageRecord{}, Current: p.def.Start}
	return p.run(ctx, env, opts)
}

// Process runs the pipeline on an envelope the caller built (NewEnvelope,
// or one a run returned), from its Current stage, or the start stage when
// it names none, to the end or a pause. The envelope is the run's: its
// outputs, history and hop count go on from what it holds.
func (p *Pipeline) Process(ctx context.Context, env *Envelope, opts ...RunOption) (*Result, error) {
	if err := p.adopt(env, p.def.Start); err != nil {
		return nil, err
	}
	return p.run(ctx, env, opts)
}

// ProcessStage runs one stage on env, as a jeeves Agent processes an
// envelope: its hooks, its work, its output stored under its output key,
// and its routing decided (env.Current is the next stage), then stops.
func (p *Pipeline) ProcessStage(ctx context.Context, stage string, env *Envelope, opts ...RunOption) (*Result, error) {
	if _, ok := p.stages[stage]; !ok {
		return nil, fmt.Errorf("%w: pipeline %s has no stage %q", ErrInvalid, p.def.PipelineName, stage)
	}
	if err := p.adopt(env, stage); err != nil {
		return nil, err
	}
	env.Current = stage
	return p.run(ctx, env, append(slices.Clip(opts), func(c *runConfig) { c.oneStage = true }))
}

// adopt readies a caller's envelope for this pipeline: what it lacks is
// made, its raw input normalised to JSON values.
func (p *Pipeline) adopt(env *Envelope, start string) error {
	if env == nil {
		return fmt.Errorf("%w: nil envelope (pipeline.NewEnvelope makes one)", ErrInvalid)
	}
	if env.Pipeline == "" {
		env.Pipeline = p.def.PipelineName
	} else if env.Pipeline != p.def.PipelineName {
		return fmt.Errorf("%w: %q, not %q", ErrWrongPipeline, env.Pipeline, p.def.PipelineName)
	}
	if env.Pending != nil {
		return fmt.Errorf("%w: it waits at stage %s for an answer: Resume it", ErrInvalid, env.Pending.Stage)
	}
	if env.Format == "" {
		env.Format = EnvelopeFormat
	}
	if env.ID == "" {
		env.ID = ids.New("env")
	}
	raw, err := jsonObject(env.RawInput)
	if env.RawInput == nil {
		raw, err = map[string]any{}, nil
	}
	if err != nil {
		return fmt.Errorf("%w: raw input: %v", ErrInvalid, err)
	}
	env.RawInput = raw
	if env.Outputs == nil {
		env.Outputs = map[string]map[string]any{}
	}
	if env.Metadata == nil {
		env.Metadata = map[string]any{}
	}
	if env.History == nil {
		env.History = []StageRecord{}
	}
	if env.Current == End && len(env.History) > 0 {
		return fmt.Errorf("%w: the envelope is finished (it reached the end after stage %s): a new run takes a new envelope (NewEnvelope)",
			ErrInvalid, env.History[len(env.History)-1].Stage)
	}
	if env.Current == "" || env.Current == End {
		env.Current = start
	}
	return nil
}

// checkCurrent refuses an envelope whose stage to run (or to resume) is
// not one of the pipeline's: an envelope of another pipeline, or edited.
func (p *Pipeline) checkCurrent(env *Envelope) error {
	if _, ok := p.stages[env.Current]; ok || env.Current == End {
		return nil
	}
	names := make([]string, len(p.def.Stages))
	for i, st := range p.def.Stages {
		names[i] = st.Name
	}
	return fmt.Errorf("%w: it is at stage %q, which pipeline %s@%s does not have (its stages: %s)",
		ErrWrongPipeline, env.Current, p.def.PipelineName, p.def.Version, strings.Join(names, ", "))
}

// Resume continues a paused pipeline (outcome clarify or confirm) from the
// stage that paused it, with the user's answer: the stage's agent gets it as
// the input key "user_response", and it is kept in the envelope's metadata.
func (p *Pipeline) Resume(ctx context.Context, env *Envelope, answer any, opts ...RunOption) (*Result, error) {
	if env == nil || env.Pending == nil {
		return nil, ErrNotPaused
	}
	if env.Pipeline != p.def.PipelineName {
		return nil, fmt.Errorf("%w: %q, not %q", ErrWrongPipeline, env.Pipeline, p.def.PipelineName)
	}
	if env.Metadata == nil {
		env.Metadata = map[string]any{}
	}
	env.Metadata["user_response"] = answer
	env.Current, env.Pending = env.Pending.Stage, nil
	return p.run(ctx, env, opts)
}

// equal compares JSON values whatever their Go types (json.Number, float64, int).
func equal(a, b any) bool {
	norm := func(v any) any {
		data, err := json.Marshal(v)
		if err != nil {
			return v
		}
		var out any
		if json.Unmarshal(data, &out) != nil {
			return v
		}
		return out
	}
	return reflect.DeepEqual(norm(a), norm(b))
}

// lookup finds a dotted path in an output.
func lookup(out map[string]any, path string) (any, bool) {
	var cur any = out
	for _, part := range strings.Split(path, ".") {
		m, ok := cur.(map[string]any)
		if !ok {
			return nil, false
		}
		if cur, ok = m[part]; !ok {
			return nil, false
		}
	}
	return cur, true
}

// logOptions are the options of the pipeline's run log writers.
func (p *Pipeline) logOptions(more ...journal.Option) []journal.Option {
	if p.seal == nil {
		return more
	}
	return append([]journal.Option{journal.Sealed(p.seal)}, more...)
}
