package agent

import (
	"bytes"
	"encoding/json"
	"fmt"

	"github.com/agentry/agentry/llm"
	"github.com/agentry/agentry/spec"
)

// StackPrompt is a structured agent's prompt for one input, as the Agent
// Stack's AgentPrompt is: its messages and response format, composed
// once, and the parser of the model's reply, so that a caller's own model
// client goes in between. Agent.Prompt makes it; FromDir(dir,
// "NAME@VERSION") then Prompt(payload) is the seed's
// AgentFactory.create(agent_name, version, input_payload).
type StackPrompt struct {
	// Messages are the system and user messages to send (with the spec's
	// initial messages between them).
	Messages []llm.Message
	// ResponseFormat is the output schema, for a client that takes one.
	ResponseFormat json.RawMessage
	a              *Agent
}

// Prompt checks input against the agent (input_keys, input_schema, the
// ${var}s of its texts), as a run would, and composes its prompt. Only
// the structured modes (chooser, writer, extractor) make one model call
// from one prompt; another mode is ErrConfig. Bad input is an
// *InputError naming each problem.
func (a *Agent) Prompt(input map[string]any) (*StackPrompt, error) {
	switch a.spec.Mode {
	case spec.ModeChooser, spec.ModeWriter, spec.ModeExtractor:
	default:
		return nil, fmt.Errorf("%w: agent %s is in mode %s, which calls its model in a loop: only chooser, writer and extractor have one prompt",
			ErrConfig, a.spec.AgentName, a.spec.Mode)
	}
	if input == nil {
		input = map[string]any{}
	}
	msgs, err := a.initialMessages(input)
	if err != nil {
		return nil, err
	}
	// A copy: a caller that edits the prompt does not change the agent.
	return &StackPrompt{Messages: msgs, ResponseFormat: bytes.Clone(a.spec.OutputSchema), a: a}, nil
}

// ParseAndValidate turns a raw reply into the output: the JSON object in
// it (bare, fenced or inside prose), its defaults filled in, valid against
// the output schema and enums. A reply that is not is an error naming
// each problem (a *prompt.ValidationError).
func (p *StackPrompt) ParseAndValidate(raw string) (map[string]any, error) {
	return p.a.prompt.ParseAndValidate(raw)
}
