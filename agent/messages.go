package agent

import (
	"bytes"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/agentry/agentry/llm"
	"github.com/agentry/agentry/prompt"
	"github.com/agentry/agentry/schema"
)

// initialMessages are the messages a run starts from, as the agent's
// mode makes them of its input (and the spec's messages, its history),
// after the input is checked against the spec: every problem is named in
// one *InputError.
func (a *Agent) initialMessages(input map[string]any) ([]llm.Message, error) {
	var probs []string
	for _, k := range a.spec.InputKeys {
		if _, ok := input[k]; !ok {
			probs = append(probs, fmt.Sprintf("missing input key %q", k))
		}
	}
	if a.inputSchema != nil {
		if err := a.inputSchema.Validate(jsonValue(input)); err != nil {
			var ve *schema.ValidationError
			if errors.As(err, &ve) {
				probs = append(probs, ve.Strings()...)
			} else {
				probs = append(probs, err.Error())
			}
		}
	}
	msgs, more := modes[a.spec.Mode].messages(a, input)
	probs = append(probs, more...)
	if len(a.spec.Messages) > 0 {
		var hist []string
		msgs, hist = a.withHistory(msgs, input)
		probs = append(probs, hist...)
	}
	_, cprobs := constraintsOf(input)
	probs = append(probs, cprobs...)
	if len(probs) > 0 {
		return nil, &InputError{Agent: a.spec.AgentName, Problems: probs}
	}
	return msgs, nil
}

// composedMessages are the neutral AgentPrompt of the structured modes.
func composedMessages(a *Agent, input map[string]any) ([]llm.Message, []string) {
	msgs, _, err := a.prompt.Compose(input)
	if err != nil {
		return nil, []string{err.Error()}
	}
	return msgs, nil
}

// toolsMessages are the system prompt (system_text, then purpose_text) and
// the first user message (user_text, or the input as key = "value" lines).
func toolsMessages(a *Agent, input map[string]any) ([]llm.Message, []string) {
	var probs []string
	system, err1 := a.systemText(input)
	purpose, err2 := prompt.Render("purpose_text", a.spec.PurposeText, input)
	user, err3 := prompt.Render("user_text", a.spec.UserText, input)
	for _, err := range []error{err1, err2, err3} {
		if err != nil {
			probs = append(probs, err.Error())
		}
	}
	if purpose != "" {
		if system != "" {
			system += "\n\n"
		}
		system += purpose
	}
	if user == "" {
		user = prompt.InputLines(input, a.spec.InputKeys)
	}
	if user == "" {
		user = "Begin."
	}
	msgs := make([]llm.Message, 0, max(hint(&a.sizes.messages), 2))
	if system != "" {
		msgs = append(msgs, llm.Message{Role: llm.RoleSystem, Content: system})
	}
	msgs = append(msgs, a.examples()...)
	return append(msgs, llm.Message{Role: llm.RoleUser, Content: user}), probs
}

// withHistory puts the spec's initial messages after the system prompt
// and before the task, their ${var}s filled from the input.
func (a *Agent) withHistory(msgs []llm.Message, input map[string]any) ([]llm.Message, []string) {
	var probs []string
	at := 0
	for at < len(msgs) && msgs[at].Role == llm.RoleSystem {
		at++
	}
	hist := make([]llm.Message, len(a.spec.Messages))
	for i, m := range a.spec.Messages {
		text, err := prompt.Render(fmt.Sprintf("messages[%d]", i), m.Content, input)
		if err != nil {
			probs = append(probs, err.Error())
		}
		m.Content = text
		m.ToolCalls = slices.Clone(m.ToolCalls)
		if m.Media != nil { // the run's own: a caller who edits it does not edit the agent
			media := llm.Media{Images: slices.Clone(m.Media.Images)}
			for j := range media.Images {
				media.Images[j].Data = bytes.Clone(media.Images[j].Data)
			}
			m.Media = &media
		}
		hist[i] = m
	}
	out := make([]llm.Message, 0, len(msgs)+len(hist))
	out = append(append(append(out, msgs[:at]...), hist...), msgs[at:]...)
	return out, probs
}

// instructed puts a caller's instructions after the system prompt, as a
// system message of their own: a conversation's history, which starts
// after the system messages, never holds them.
func instructed(msgs []llm.Message, text string) []llm.Message {
	at := 0
	for at < len(msgs) && msgs[at].Role == llm.RoleSystem {
		at++
	}
	return slices.Insert(msgs, at, llm.Message{Role: llm.RoleSystem, Content: text})
}

// attachImages puts images on the last user message of msgs, the task.
func attachImages(msgs []llm.Message, images []llm.Image) error {
	for i, im := range images {
		switch {
		case im.URL == "" && len(im.Data) == 0:
			return fmt.Errorf("%w: WithImages: image %d has neither a URL nor bytes", ErrConfig, i)
		case im.URL == "" && !strings.HasPrefix(im.MIMEType, "image/"):
			return fmt.Errorf("%w: WithImages: image %d's bytes need an image/ MIME type, not %q", ErrConfig, i, im.MIMEType)
		}
	}
	for i := len(msgs) - 1; i >= 0; i-- {
		if msgs[i].Role == llm.RoleUser {
			media := &llm.Media{Images: slices.Clone(msgs[i].Images())}
			media.Images = append(media.Images, images...)
			msgs[i].Media = media
			return nil
		}
	}
	return fmt.Errorf("%w: WithImages: the agent's prompt has no user message to carry them", ErrConfig)
}
