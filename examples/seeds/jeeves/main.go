// Command jeeves is the jeeves seed's pipeline in agentry: stages whose
// work is Go hooks (a planner that returns typed plan steps, a plan
// executed by a tools-plan stage, a reviewer), routing rules with a loop
// back, outcomes, and an envelope the caller builds from raw text and
// processes. Offline:
//
//	go run ./examples/seeds/jeeves
package main

import (
	"context"
	"fmt"
	"io"
	"log"
	"os"
	"strings"

	"github.com/agentry/agentry/pipeline"
	"github.com/agentry/agentry/tool"
	"github.com/agentry/agentry/tool/kv"
)

// step is a plan step as a Go hook returns it: the pipeline turns it into
// JSON values before the plan runs.
type step struct {
	Tool       string         `json:"tool"`
	Parameters map[string]any `json:"parameters"`
}

const definition = `{"pipeline_name": "release", "version": "v1", "max_hops": 8, "stages": [
  {"name": "planner", "agent": {"agent_name": "planner", "version": "v1", "mode": "service"}, "output_key": "plan"},
  {"name": "executor", "agent": {"agent_name": "executor", "version": "v1", "mode": "plan", "tools": ["kv_set", "kv_get"]},
   "output_key": "execution"},
  {"name": "reviewer", "agent": {"agent_name": "reviewer", "version": "v1", "mode": "service"}, "output_key": "review",
   "routing_rules": [{"condition": "approved", "value": false, "target": "planner"}], "default_next": "end"}]}`

func main() {
	if err := run(os.Stdout); err != nil {
		log.Fatal(err)
	}
}

func run(out io.Writer) error {
	d, err := pipeline.Parse("release", []byte(definition))
	if err != nil {
		return err
	}
	tools, err := tool.NewRegistry(kv.Tools(kv.NewStore())...)
	if err != nil {
		return err
	}
	plans := 0
	p, err := pipeline.New(d, ".", pipeline.WithTools(tools),
		pipeline.WithHooks("planner", pipeline.Hooks{
			PreProcess: func(_ context.Context, env *pipeline.Envelope) error {
				env.Metadata["requested_by"] = "ops"
				return nil
			},
			Work: func(_ context.Context, env *pipeline.Envelope) (map[string]any, error) {
				plans++
				version := "2.0"
				if plans > 1 { // the reviewer asked for the patch release
					version = "2.0.1"
				}
				return map[string]any{"steps": []step{
					{Tool: "kv_set", Parameters: map[string]any{"key": "release", "value": version}},
					{Tool: "kv_get", Parameters: map[string]any{"key": "release"}},
				}}, nil
			},
		}),
		pipeline.WithHooks("reviewer", pipeline.Hooks{
			Work: func(_ context.Context, env *pipeline.Envelope) (map[string]any, error) {
				results, _ := env.Outputs["execution"]["results"].([]any)
				last, _ := results[len(results)-1].(map[string]any)
				value := fmt.Sprint(last["data"].(map[string]any)["value"])
				return map[string]any{"approved": value == "2.0.1", "seen": value}, nil
			},
		}))
	if err != nil {
		return err
	}
	defer p.Close()
	env, err := pipeline.NewEnvelope("ship the next release")
	if err != nil {
		return err
	}
	res, err := p.Process(context.Background(), env)
	if err != nil {
		return err
	}
	var path []string
	for _, h := range env.History {
		path = append(path, h.Stage+":"+string(h.Outcome))
	}
	fmt.Fprintf(out, "task: %v\n", env.RawInput["task"])
	fmt.Fprintf(out, "stages: %s\n", strings.Join(path, " "))
	fmt.Fprintf(out, "released: %v, approved: %v, hops: %d\n", env.Outputs["review"]["seen"], env.Outputs["review"]["approved"], env.HopCount)
	fmt.Fprintf(out, "outcome: %s (%s)\n", res.Outcome, res.TerminateReason)
	return nil
}
