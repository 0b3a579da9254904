// Package pipeline runs agents as the stages of a configuration-driven
// pipeline (the jeeves model): an envelope travels from stage to stage,
// each stage's agent processes it, its output is stored under an output
// key, routing rules pick the next stage, and outcomes (clarify, confirm,
// replan, loop_back, ...) pause, loop or end the run.
package pipeline

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"

	"github.com/agentry/agentry/internal/strictjson"
	"github.com/agentry/agentry/spec"
)

// End is the target that finishes a pipeline.
const End = "end"

// Definition is a pipeline as JSON.
type Definition struct {
	PipelineName string `json:"pipeline_name"`
	Version      string `json:"version"`
	Description  string `json:"description,omitempty"`
	// Start is the first stage; default the first listed.
	Start string `json:"start,omitempty"`
	// MaxHops bounds the stages run in all, loops included; default 20.
	MaxHops   int   `json:"max_hops,omitempty"`
	TimeoutMS int64 `json:"timeout_ms,omitempty"`
	// ReplanStage is where a replan outcome goes; default Start.
	ReplanStage string `json:"replan_stage,omitempty"`
	// AgentsDir resolves agent references, relative to the file.
	AgentsDir string `json:"agents_dir,omitempty"`
	// ModelRoles maps a role to the model of every stage that names it
	// (jeeves' ModelRole): "planner": "gpt-4.1". One change swaps the
	// model of all the stages of a role; WithModelRoles (a flag, a
	// server's setting) overrides it.
	ModelRoles map[string]string `json:"model_roles,omitempty"`
	Stages     []Stage           `json:"stages"`
}

// Stage is one step of a pipeline.
type Stage struct {
	Name string `json:"name"`
	// Agent is "NAME[@VERSION]" in the agents directory, or an inline spec.
	Agent json.RawMessage `json:"agent"`
	// OutputKey is where the stage's output goes in the envelope's
	// outputs; default its agent's output_name, else the stage's name.
	OutputKey string `json:"output_key,omitempty"`
	// RequiredOutputFields must be in the stage's output.
	RequiredOutputFields []string `json:"required_output_fields,omitempty"`
	RoutingRules         []Rule   `json:"routing_rules,omitempty"`
	// DefaultNext is the stage after this one when no rule matches; "end"
	// (the default for the last stage) finishes.
	DefaultNext string `json:"default_next,omitempty"`
	// LoopTarget is where a loop_back outcome goes; default the stage run
	// before this one.
	LoopTarget string `json:"loop_target,omitempty"`
	// PlanKey is where a plan-mode stage finds its plan; default "plan".
	PlanKey string `json:"plan_key,omitempty"`
	// ModelRole names the role whose model the stage's agent runs with,
	// in place of its spec's model_name (see Definition.ModelRoles).
	ModelRole string `json:"model_role,omitempty"`
}

// Rule routes on a field of the stage's output.
type Rule struct {
	// Condition is the output field (a dotted path for nested fields).
	Condition string `json:"condition"`
	Value     any    `json:"value"`
	Target    string `json:"target"`
}

// DefinitionError lists what is wrong with a definition.
type DefinitionError struct {
	Source   string
	Problems []string
}

func (e *DefinitionError) Error() string {
	return e.Source + ": " + strings.Join(e.Problems, "; ")
}

// Is makes errors.Is(err, ErrInvalid) true.
func (e *DefinitionError) Is(target error) bool { return target == ErrInvalid }

// IsPipeline reports whether a JSON document is a pipeline definition (it
// has "pipeline_name").
func IsPipeline(data []byte) bool {
	var probe struct {
		Name *string `json:"pipeline_name"`
	}
	return json.Unmarshal(data, &probe) == nil && probe.Name != nil
}

// Parse decodes and checks a definition strictly.
func Parse(source string, data []byte) (*Definition, error) {
	var d Definition
	if err := strictjson.Decode(data, &d); err != nil {
		return nil, &DefinitionError{Source: source, Problems: []string{err.Error()}}
	}
	if err := d.Check(); err != nil {
		var de *DefinitionError
		if errors.As(err, &de) {
			de.Source = source
		}
		return nil, err
	}
	return &d, nil
}

// Load reads the definition file at path.
func Load(path string) (*Definition, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, &DefinitionError{Source: path, Problems: []string{err.Error()}}
	}
	return Parse(path, data)
}

func (d *Definition) stage(name string) *Stage {
	for i := range d.Stages {
		if d.Stages[i].Name == name {
			return &d.Stages[i]
		}
	}
	return nil
}

// Check reports what is wrong with the definition: missing names, unknown
// targets, duplicate stages, unreachable stages, and cycles that can never
// reach the end.
func (d *Definition) Check() error {
	var p []string
	bad := func(format string, a ...any) { p = append(p, fmt.Sprintf(format, a...)) }
	if d.PipelineName == "" {
		bad("pipeline_name is required")
	}
	if d.Version == "" {
		bad("version is required")
	}
	if d.MaxHops < 0 {
		bad("max_hops %d is negative", d.MaxHops)
	}
	if d.TimeoutMS < 0 {
		bad("timeout_ms %d is negative", d.TimeoutMS)
	}
	if len(d.Stages) == 0 {
		bad("stages: a pipeline needs at least one stage")
		return &DefinitionError{Problems: p}
	}
	if d.Start == "" {
		d.Start = d.Stages[0].Name
	}
	if d.MaxHops == 0 {
		d.MaxHops = 20
	}
	if d.ReplanStage == "" {
		d.ReplanStage = d.Start
	}
	names := d.checkStages(bad)
	d.checkTargets(names, bad)
	if len(p) == 0 {
		p = append(p, d.checkGraph()...)
	}
	if len(p) > 0 {
		return &DefinitionError{Problems: p}
	}
	return nil
}

// checkStages checks each stage and fills its defaults; it returns the
// stage names.
func (d *Definition) checkStages(bad func(string, ...any)) map[string]bool {
	names := map[string]bool{}
	for i := range d.Stages {
		s := &d.Stages[i]
		if s.Name == "" {
			bad("stages[%d]: name is required", i)
			continue
		}
		where := "stage " + s.Name
		if s.Name == End {
			bad("%s: %q is reserved for the end of the pipeline", where, End)
		}
		if names[s.Name] {
			bad("%s: the name is used twice", where)
		}
		names[s.Name] = true
		if len(s.Agent) == 0 || string(s.Agent) == "null" {
			bad("%s: agent is required (a NAME@VERSION reference or an inline spec)", where)
		}
		if s.PlanKey == "" {
			s.PlanKey = "plan"
		}
		if s.DefaultNext == "" {
			s.DefaultNext = End
			if i+1 < len(d.Stages) {
				s.DefaultNext = d.Stages[i+1].Name
			}
		}
		if s.ModelRole != "" && !spec.ValidName(s.ModelRole) {
			bad("%s: model_role %q: want a name of letters, digits, '_' and '-'", where, s.ModelRole)
		}
		for j, r := range s.RoutingRules {
			if r.Condition == "" {
				bad("%s: routing_rules[%d]: condition is required", where, j)
			}
			if r.Target == "" {
				bad("%s: routing_rules[%d]: target is required", where, j)
			}
		}
	}
	return names
}

// checkTargets checks that every stage a definition names exists.
func (d *Definition) checkTargets(names map[string]bool, bad func(string, ...any)) {
	exists := func(t string) bool { return t == End || names[t] }
	if !names[d.Start] {
		bad("start: there is no stage %q", d.Start)
	}
	if !names[d.ReplanStage] {
		bad("replan_stage: there is no stage %q", d.ReplanStage)
	}
	for _, s := range d.Stages {
		for j, r := range s.RoutingRules {
			if r.Target != "" && !exists(r.Target) {
				bad("stage %s: routing_rules[%d]: target %q does not exist", s.Name, j, r.Target)
			}
		}
		if !exists(s.DefaultNext) {
			bad("stage %s: default_next %q does not exist", s.Name, s.DefaultNext)
		}
		if s.LoopTarget != "" && !names[s.LoopTarget] {
			bad("stage %s: loop_target %q does not exist", s.Name, s.LoopTarget)
		}
	}
}

// edges are the stages a stage may go to by routing (loops by outcome are
// extra ways back, not ways out).
func (d *Definition) edges(s *Stage) []string {
	out := []string{s.DefaultNext}
	for _, r := range s.RoutingRules {
		out = append(out, r.Target)
	}
	return out
}

// checkGraph reports stages the start cannot reach and stages from which
// the end cannot be reached (a cycle without an exit).
func (d *Definition) checkGraph() []string {
	var p []string
	reach := map[string]bool{}
	var walk func(string)
	walk = func(n string) {
		if n == End || reach[n] {
			return
		}
		reach[n] = true
		s := d.stage(n)
		for _, t := range d.edges(s) {
			walk(t)
		}
		if s.LoopTarget != "" {
			walk(s.LoopTarget)
		}
	}
	walk(d.Start)
	walk(d.ReplanStage)
	for _, s := range d.Stages {
		if !reach[s.Name] {
			p = append(p, fmt.Sprintf("stage %s is unreachable from start %q", s.Name, d.Start))
		}
	}
	// Which stages can reach the end: a fixpoint over the edges.
	exits := map[string]bool{End: true}
	for changed := true; changed; {
		changed = false
		for _, s := range d.Stages {
			if exits[s.Name] {
				continue
			}
			if slices.ContainsFunc(d.edges(&s), func(t string) bool { return exits[t] }) {
				exits[s.Name], changed = true, true
			}
		}
	}
	for _, s := range d.Stages {
		if reach[s.Name] && !exits[s.Name] {
			p = append(p, fmt.Sprintf("stage %s is in a cycle without an exit: from it the pipeline can never reach %q", s.Name, End))
		}
	}
	return p
}

// agentRef returns the stage's agent reference, or "" for an inline spec.
func (s *Stage) agentRef() (ref string, inline bool) {
	var r string
	if json.Unmarshal(s.Agent, &r) == nil {
		return r, false
	}
	return "", true
}

// inlineSpec parses the stage's inline agent spec.
func (s *Stage) inlineSpec() (*spec.Spec, error) {
	return spec.Parse("stage "+s.Name+" agent", s.Agent)
}
