package agent

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strings"

	"github.com/agentry/agentry/event"
	"github.com/agentry/agentry/llm"
	"github.com/agentry/agentry/prompt"
	"github.com/agentry/agentry/schema"
)

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

// answer validates a final answer when the agent has an output schema: a
// valid one is final; an invalid one is sent back for correction while
// retry.output_attempts last, then final with ErrValidation. Without a
// schema, an answer that is one JSON object is the object.
func (r *run) answer(content string) Decision {
	if r.a.prompt == nil {
		r.final = Final{Text: content, Output: jsonAnswer(content)} // in the run: no allocation of its own
		return Decision{Final: &r.final}
	}
	obj, probs := r.a.checkOutput(content)
	if len(probs) == 0 {
		r.validated = true
		return Decision{Final: &Final{Text: content, Output: obj}}
	}
	if r.s.bus.Active() {
		r.emit(event.Event{Type: event.Error, Error: &event.ErrorInfo{Code: CodeValidation, Message: strings.Join(probs, "; ")}})
	}
	if int(r.outputRetries) < r.a.retry.OutputAttempts && r.outputRetries < math.MaxUint16 {
		r.outputRetries++
		return Decision{Message: &llm.Message{Role: llm.RoleUser, Content: correction(probs)}}
	}
	err := withDetails(fmt.Errorf("%w after %d attempts: %s", ErrValidation, r.outputRetries+1, strings.Join(probs, "; ")),
		map[string]any{"problems": probs, "attempts": r.outputRetries + 1})
	return Decision{Final: &Final{Text: content, Err: err}}
}

// jsonAnswer is the object a schema-less answer is when the whole answer,
// trimmed or inside one ``` fence, is one JSON object; nil otherwise.
// Prose that quotes an object, and JSON that is not an object (a number,
// a list), stay text.
func jsonAnswer(content string) any {
	s := unfenced(content)
	if len(s) < 2 || s[0] != '{' || s[len(s)-1] != '}' {
		return nil
	}
	if v, err := schema.Decode([]byte(s)); err == nil {
		if obj, ok := v.(map[string]any); ok {
			return obj
		}
	}
	return nil
}

// finalJSON is ReAct's Final Answer as JSON when it is JSON (the Noema
// seed: "parsed as JSON if possible"): any value, an array, a number, a
// boolean or a quoted string too; nil otherwise.
func finalJSON(content string) any {
	s := unfenced(content)
	if s == "" || !json.Valid([]byte(s)) {
		return nil
	}
	v, err := schema.Decode([]byte(s))
	if err != nil || v == nil {
		return nil
	}
	return v
}

// unfenced is content trimmed, or the body of the one ``` fence it is.
func unfenced(content string) string {
	s := strings.TrimSpace(content)
	if rest, ok := strings.CutPrefix(s, "```"); ok {
		_, body, found := strings.Cut(rest, "\n") // past the fence's language tag
		body, closed := strings.CutSuffix(strings.TrimSpace(body), "```")
		if !found || !closed {
			return ""
		}
		s = strings.TrimSpace(body)
	}
	return s
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
