package agent

import (
	"errors"
	"fmt"
	"strings"

	"github.com/agentry/agentry/event"
	"github.com/agentry/agentry/llm"
	"github.com/agentry/agentry/prompt"
)

// ErrValidation is matched by the error of a run whose final answer never
// matched the output schema.
var ErrValidation = errors.New("output does not match the output schema")

// checkOutput turns a final answer into the validated output, or says
// what is wrong with it.
func (a *Agent) checkOutput(content string) (map[string]any, []string) {
	obj, err := a.prompt.ParseAndValidate(content)
	if err == nil {
		return obj, nil
	}
	var ve *prompt.ValidationError
	if errors.As(err, &ve) {
		return ve.Output, ve.Problems
	}
	return nil, []string{err.Error()}
}

// finalAnswer validates a final answer when the agent has an output
// schema. It reports whether the loop should go on (the model is asked to
// correct itself), or the outcome.
func (r *run) finalAnswer(content string) (again bool, o outcome, err error) {
	if r.a.prompt == nil {
		return false, outcome{reason: ReasonCompleted, content: content}, nil
	}
	obj, probs := r.a.checkOutput(content)
	if len(probs) == 0 {
		r.validated = true
		return false, outcome{reason: ReasonCompleted, output: obj}, nil
	}
	if r.s.bus.Active() {
		r.emit(event.Event{Type: event.Error, Error: &event.ErrorInfo{Code: CodeValidation, Message: strings.Join(probs, "; ")}})
	}
	if r.outputRetries < r.a.retry.OutputAttempts {
		r.outputRetries++
		r.st.Messages = append(r.st.Messages, llm.Message{Role: llm.RoleUser, Content: correction(probs)})
		return true, outcome{}, nil
	}
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
