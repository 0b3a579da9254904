package agent

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/agentry/agentry/llm"
	"github.com/agentry/agentry/policy"
	"github.com/agentry/agentry/prompt"
)

// WithPrompts gives the agent the prompt store its spec's prompt_ref (and
// a react_template of the form id@version) is taken from.
func WithPrompts(s prompt.Store) Option { return func(o *options) { o.prompts = s } }

// resolvePrompts takes the spec's templates from the prompt store, and
// pins prompt_ref to the version it found, so that a resume of the run
// renders the same text.
func (a *Agent) resolvePrompts(o options) []string {
	var probs []string
	if ref := a.spec.PromptRef; ref != "" {
		t, err := a.template(o, ref)
		if err != nil {
			return []string{fmt.Sprintf("prompt_ref %q: %v", ref, err)}
		}
		// The policy's prompt filters look at the template's text.
		text, applied := a.spec.Policy.Apply(policy.Prompt, t.Text)
		if f, blocked := policy.Blocked(applied); blocked {
			return []string{fmt.Sprintf("prompt_ref %s: the content filter %s of the policy blocks the template's text", t.Ref(), f)}
		}
		t.Text = text
		a.sysTpl = &t
		a.spec.PromptRef = t.Ref()
	}
	if ref := a.spec.ReActTemplate; strings.Contains(ref, "@") { // "v1" is built in, "id@version" in the store
		t, err := a.template(o, ref)
		switch {
		case err != nil:
			probs = append(probs, fmt.Sprintf("react_template %q: %v", ref, err))
		case t.Engine != prompt.Go:
			probs = append(probs, fmt.Sprintf("react_template %s: a ReAct template is rendered with engine go, not %s", t.Ref(), t.Engine))
		default:
			a.reactTpl = &t
			a.spec.ReActTemplate = t.Ref()
		}
	}
	return probs
}

func (a *Agent) template(o options, ref string) (prompt.Template, error) {
	if o.prompts == nil {
		return prompt.Template{}, fmt.Errorf("no prompt store to take it from (agent.WithPrompts)")
	}
	id, version, err := prompt.ParseRef(ref)
	if err != nil {
		return prompt.Template{}, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	return o.prompts.Get(ctx, id, version)
}

// systemText is the system text for input: the prompt_ref template's, or
// system_text's.
func (a *Agent) systemText(input map[string]any) (string, error) {
	if a.sysTpl == nil {
		return prompt.Render("system_text", a.spec.SystemText, input)
	}
	r, err := a.sysTpl.Render(input, true)
	return r.Text, err
}

// examples are the few-shot examples of the prompt_ref template, as
// turns of the conversation before the task; none when the spec turns
// few-shot examples off.
func (a *Agent) examples() []llm.Message {
	if a.sysTpl == nil || !a.fewShot() {
		return nil
	}
	ex, _ := a.sysTpl.Examples() // validated when it was stored
	var out []llm.Message
	for _, e := range ex {
		out = append(out, llm.Message{Role: llm.RoleUser, Content: e.Input}, llm.Message{Role: llm.RoleAssistant, Content: e.Output})
	}
	return out
}

// reactExamples are the prompt_ref template's examples as the ReAct
// prompt shows few-shot examples.
func (a *Agent) reactExamples() []string {
	if a.sysTpl == nil {
		return nil
	}
	ex, _ := a.sysTpl.Examples()
	var out []string
	for _, e := range ex {
		raw, _ := json.Marshal(e)
		out = append(out, fewShot(raw))
	}
	return out
}

// fewShot says whether the prompt shows few-shot examples (the spec's
// few_shot_enabled, on by default).
func (a *Agent) fewShot() bool {
	on := a.spec.FewShotEnabled
	return on == nil || *on
}
