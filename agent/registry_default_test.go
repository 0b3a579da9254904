package agent_test

import (
	"context"
	"testing"

	"github.com/agentry/agentry/agent"
	"github.com/agentry/agentry/llm/scripted"
	"github.com/agentry/agentry/pipeline"
	"github.com/agentry/agentry/spec"
)

// TestDefaultRegistry: an agent registered in the process's registry is
// the sub-agent, and the pipeline stage, of agents and pipelines given
// no registry of their own: the same instance, whose script plays on
// from one to the other.
func TestDefaultRegistry(t *testing.T) {
	script, _ := scripted.New("helper", scripted.Turn{Content: "Helped."}, scripted.Turn{Content: "Helped again."})
	helper, err := agent.New(&spec.Spec{AgentName: "dr-helper", Version: "v1", Description: "Helps.", SystemText: "Help."},
		agent.WithProvider(script.Model(), "scripted"))
	if err != nil {
		t.Fatal(err)
	}
	defer helper.Close()
	if err := agent.DefaultRegistry().Register(helper); err != nil {
		t.Fatal(err)
	}
	defer agent.DefaultRegistry().Unregister("dr-helper@v1")

	boss, _ := scripted.New("boss", scripted.Turn{ToolCalls: []scripted.ToolCall{{Name: "dr-helper", Arguments: map[string]any{"task": "help"}}}},
		scripted.Turn{Content: "Done."})
	b, err := agent.New(&spec.Spec{AgentName: "dr-boss", Version: "v1", SystemText: "Delegate.", Tools: []string{"agent:dr-helper"}},
		agent.WithProvider(boss.Model(), "scripted"))
	if err != nil {
		t.Fatalf("a sub-agent from the default registry: %v", err)
	}
	defer b.Close()
	res, err := b.Run(context.Background(), nil)
	if err != nil || len(res.Steps) != 1 || res.Steps[0].Observation == "" {
		t.Fatalf("the boss's run: %v, %+v", err, res)
	}

	p, err := pipeline.New(&pipeline.Definition{PipelineName: "dr", Version: "v1",
		Stages: []pipeline.Stage{{Name: "help", Agent: []byte(`"dr-helper@v1"`)}}}, t.TempDir())
	if err != nil {
		t.Fatalf("a stage from the default registry: %v", err)
	}
	pres, err := p.Run(context.Background(), map[string]any{})
	if err != nil || pres.Envelope.Outputs["help"]["text"] != "Helped again." {
		t.Fatalf("the pipeline's run: %v, %+v", err, pres)
	}
	p.Close()
}
