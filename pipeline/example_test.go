package pipeline_test

import (
	"context"
	"fmt"

	"github.com/agentry/agentry/pipeline"
)

func Example() {
	def, err := pipeline.Parse("example", []byte(`{
		"pipeline_name": "deploy", "version": "v1",
		"stages": [
			{"name": "check", "agent": {"agent_name": "check", "version": "v1", "mode": "service"},
			 "routing_rules": [{"condition": "ok", "value": false, "target": "end"}]},
			{"name": "ship", "agent": {"agent_name": "ship", "version": "v1", "mode": "service"}}]}`))
	if err != nil {
		fmt.Println(err)
		return
	}
	p, err := pipeline.New(def, ".",
		pipeline.WithHooks("check", pipeline.Hooks{Work: func(_ context.Context, env *pipeline.Envelope) (map[string]any, error) {
			return map[string]any{"ok": env.RawInput["version"] != ""}, nil
		}}),
		pipeline.WithHooks("ship", pipeline.Hooks{Work: func(_ context.Context, env *pipeline.Envelope) (map[string]any, error) {
			return map[string]any{"shipped": env.RawInput["version"]}, nil
		}}))
	if err != nil {
		fmt.Println(err)
		return
	}
	res, err := p.Run(context.Background(), map[string]any{"version": "1.2.0"})
	fmt.Println(res.Success, res.Decision, res.Envelope.Outputs["ship"]["shipped"], err)
	// Output: true Stages: check (success) → ship (success) 1.2.0 <nil>
}
