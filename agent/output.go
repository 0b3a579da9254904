package agent

import (
	"errors"
	"fmt"
	"maps"
	"strings"

	"github.com/agentry/agentry/llm"
	"github.com/agentry/agentry/schema"
)

// ErrValidation is matched by the error of a run whose final answer never
// matched the output schema.
var ErrValidation = errors.New("output does not match the output schema")

// checkOutput turns a final answer into the validated output: the JSON
// object in the reply, with defaults filled in, valid against the output
// schema. It returns the problems when there are any.
func (a *Agent) checkOutput(content string) (map[string]any, []string) {
	raw, err := schema.ExtractJSON(content)
	if err != nil {
		return nil, []string{err.Error()}
	}
	v, err := schema.Decode(raw)
	if err != nil {
		return nil, []string{"reply is not JSON: " + err.Error()}
	}
	obj, ok := v.(map[string]any)
	if !ok {
		return nil, []string{"reply is not a JSON object"}
	}
	if len(a.spec.Defaults) > 0 {
		obj = maps.Clone(obj)
		for k, d := range a.spec.Defaults {
			if _, ok := obj[k]; !ok {
				obj[k] = jsonValue(d)
			}
		}
	}
	if err := a.outputSchema.Validate(obj); err != nil {
		var ve *schema.ValidationError
		if errors.As(err, &ve) {
			return obj, ve.Strings()
		}
		return obj, []string{err.Error()}
	}
	return obj, nil
}

// finalAnswer validates a final answer when the agent has an output
// schema. It reports whether the loop should go on (the model is asked to
// correct itself), or the outcome.
func (r *run) finalAnswer(content string) (again bool, o outcome, err error) {
	if r.a.outputSchema == nil {
		return false, outcome{reason: ReasonCompleted, content: content}, nil
	}
	obj, probs := r.a.checkOutput(content)
	if len(probs) == 0 {
		r.validated = true
		return false, outcome{reason: ReasonCompleted, output: obj}, nil
	}
	if r.outputRetries < r.a.retry.OutputAttempts {
		r.outputRetries++
		r.st.Messages = append(r.st.Messages, llm.Message{Role: llm.RoleUser, Content: correction(probs)})
		return true, outcome{}, nil
	}
	r.invalid = true
	return false, outcome{reason: ReasonCompleted, code: CodeValidation, details: map[string]any{
			"problems": probs, "attempts": r.outputRetries + 1, "recoverable": true}},
		fmt.Errorf("%w after %d attempts: %s", ErrValidation, r.outputRetries+1, strings.Join(probs, "; "))
}

func correction(probs []string) string {
	var b strings.Builder
	b.WriteString("Your reply does not match the required JSON schema:\n")
	for _, p := range probs {
		b.WriteString("- ")
		b.WriteString(p)
		b.WriteByte('\n')
	}
	b.WriteString("Reply again with a single JSON object only, no extra text, matching the schema.")
	return b.String()
}
