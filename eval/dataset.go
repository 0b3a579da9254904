// Package eval evaluates agents on datasets of cases:
// each case runs as an ordinary stored run linked to its evaluation, its
// assertions are checked on the run's Result, and the report gives the
// pass rate, steps, tool errors and latencies, tokens, cost and time per
// agent, with the changes between two agents or versions. An evaluation
// is stored in the run store with its runs, so it can be listed, shown,
// compared and scored again without calling a model.
package eval

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"regexp"
	"slices"
	"strings"

	"github.com/agentry/agentry/internal/strictjson"
	"github.com/agentry/agentry/schema"
)

// Dataset is a set of cases and the assertions every case must pass.
type Dataset struct {
	Name string `json:"name"`
	// Assert applies to every case, before the case's own.
	Assert []Assertion `json:"assert,omitempty"`
	Cases  []Case      `json:"cases"`
}

// Case is one input an agent runs on, what it should answer, and the
// assertions its run must pass.
type Case struct {
	Name  string         `json:"name"`
	Input map[string]any `json:"input"`
	// Expected is the output equals and equals_subset compare with.
	Expected json.RawMessage `json:"expected,omitempty"`
	Tags     []string        `json:"tags,omitempty"`
	Assert   []Assertion     `json:"assert,omitempty"`
	// Conversation, in place of input, makes the case a conversation:
	// each turn a user's message, a run of the agent that starts from
	// what was said before it, with its own assertions. The case passes
	// when every turn does.
	Conversation []Turn `json:"conversation,omitempty"`
}

// Turn is one message of a conversation case: the message (as
// agent.MessageInput makes a run's input of it) or the input itself,
// what the answer should be, and the assertions its run must pass (the
// dataset's apply to every turn).
type Turn struct {
	Message  string          `json:"message,omitempty"`
	Input    map[string]any  `json:"input,omitempty"`
	Expected json.RawMessage `json:"expected,omitempty"`
	Assert   []Assertion     `json:"assert,omitempty"`
}

// Assertion is one check of a run (docs/evals.md lists the types).
type Assertion struct {
	Type string `json:"type"`
	// Value is the text, pattern, schema, allowed values, outcome or limit
	// the check compares with.
	Value json.RawMessage `json:"value,omitempty"`
	// Field is a dotted path into the output, for a check of one field.
	Field string `json:"field,omitempty"`
	// Tool and Args are a tool check's: the tool, and a subset of the
	// arguments one of its calls must have.
	Tool string          `json:"tool,omitempty"`
	Args json.RawMessage `json:"args,omitempty"`
	// Agent, Rubric and MinScore are a judge's: the judge agent
	// (NAME[@VERSION]), what it scores against, and the lowest passing
	// score (default 0.5).
	Agent    string   `json:"agent,omitempty"`
	Rubric   string   `json:"rubric,omitempty"`
	MinScore *float64 `json:"min_score,omitempty"`
}

// Error is a dataset that cannot be evaluated: every problem, each naming
// the case and the field.
type Error struct {
	Source   string
	Problems []string
}

func (e *Error) Error() string {
	return fmt.Sprintf("dataset %s: %s", e.Source, strings.Join(e.Problems, "; "))
}

// Is makes errors.Is(err, ErrInvalid) true.
func (e *Error) Is(target error) bool { return target == ErrInvalid }

// Load reads and checks the dataset at path: JSON, or JSON Lines (one
// case a line; a first line without "input" holds the name and the
// assertions for all cases).
func Load(path string) (*Dataset, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, &Error{Source: path, Problems: []string{err.Error()}}
	}
	return Parse(path, data)
}

// Parse decodes and checks a dataset; source names it in errors.
func Parse(source string, data []byte) (*Dataset, error) {
	d, err := decode(data)
	if err != nil {
		return nil, &Error{Source: source, Problems: []string{err.Error()}}
	}
	if probs := d.check(); len(probs) > 0 {
		return nil, &Error{Source: source, Problems: probs}
	}
	return d, nil
}

// decode reads a JSON document, or JSON Lines: a file that is one JSON
// value is a document (its errors are the document's), unless that value
// is a case (it has "input"): a one-line JSON Lines file.
func decode(data []byte) (*Dataset, error) {
	trimmed := bytes.TrimSpace(data)
	var d Dataset
	if json.Valid(trimmed) {
		var probe map[string]json.RawMessage
		_ = json.Unmarshal(trimmed, &probe)
		if !isCase(probe) {
			if err := strictjson.Decode(trimmed, &d); err != nil {
				return nil, err
			}
			return &d, nil
		}
	} else if first, _, _ := bytes.Cut(trimmed, []byte("\n")); !json.Valid(bytes.TrimSpace(first)) {
		// Not JSON Lines either (its first line is no JSON value): a
		// document with a mistake, which its own error names.
		return nil, strictjson.Decode(trimmed, &d)
	}
	// JSON Lines.
	sc := bufio.NewScanner(bytes.NewReader(trimmed))
	sc.Buffer(make([]byte, 0, 64<<10), 16<<20)
	for n := 1; sc.Scan(); n++ {
		line := bytes.TrimSpace(sc.Bytes())
		if len(line) == 0 {
			continue
		}
		var probe map[string]json.RawMessage
		if err := json.Unmarshal(line, &probe); err != nil {
			return nil, fmt.Errorf("line %d: %v", n, err)
		}
		if !isCase(probe) && n == 1 {
			var head struct {
				Name   string      `json:"name"`
				Assert []Assertion `json:"assert"`
			}
			if err := strictjson.Decode(line, &head); err != nil {
				return nil, fmt.Errorf("line 1 (the dataset's name and assertions): %v", err)
			}
			d.Name, d.Assert = head.Name, head.Assert
			continue
		}
		var c Case
		if err := strictjson.Decode(line, &c); err != nil {
			return nil, fmt.Errorf("line %d: %v", n, err)
		}
		d.Cases = append(d.Cases, c)
	}
	return &d, sc.Err()
}

// isCase says whether a JSON object is a case: it has an input or a
// conversation.
func isCase(obj map[string]json.RawMessage) bool {
	_, input := obj["input"]
	_, conv := obj["conversation"]
	return input || conv
}

func (d *Dataset) check() []string {
	var probs []string
	if len(d.Cases) == 0 {
		probs = append(probs, "cases: the dataset has none")
	}
	for i, a := range d.Assert {
		probs = append(probs, a.check(fmt.Sprintf("assert[%d]", i))...)
	}
	for i := range d.Cases {
		c := &d.Cases[i]
		at := fmt.Sprintf("cases[%d]", i)
		switch {
		case c.Name == "":
			probs = append(probs, at+": name is required")
		case slices.IndexFunc(d.Cases, func(o Case) bool { return o.Name == c.Name }) != i:
			probs = append(probs, fmt.Sprintf("%s %q: the name is taken by an earlier case", at, c.Name))
		}
		if c.Name != "" {
			at = fmt.Sprintf("cases[%d] %q", i, c.Name)
		}
		switch {
		case len(c.Conversation) > 0:
			if c.Input != nil || len(c.Expected) > 0 || len(c.Assert) > 0 {
				probs = append(probs, at+": a conversation's input, expected and assertions are its turns'")
			}
			for j, turn := range c.Conversation {
				tat := fmt.Sprintf("%s: conversation[%d]", at, j)
				if (turn.Message == "") == (turn.Input == nil) {
					probs = append(probs, tat+": give a message or an input")
				}
				probs = append(probs, d.checkTurn(tat, turn.asCase(c, turn.Input))...)
			}
		case c.Input == nil:
			probs = append(probs, at+": input (a JSON object) or conversation is required")
		default:
			probs = append(probs, d.checkTurn(at, c)...)
		}
	}
	return probs
}

// checkTurn checks a case's (or a conversation turn's) expected answer
// and assertions.
func (d *Dataset) checkTurn(at string, c *Case) []string {
	var probs []string
	if len(c.Expected) > 0 && !json.Valid(c.Expected) {
		probs = append(probs, at+": expected is not JSON")
	}
	for j, a := range c.Assert {
		probs = append(probs, a.check(fmt.Sprintf("%s: assert[%d]", at, j))...)
	}
	for _, a := range d.Assertions(c) {
		if (a.Type == "equals" || a.Type == "equals_subset") && len(c.Expected) == 0 && len(a.Value) == 0 {
			probs = append(probs, fmt.Sprintf("%s: expected is required by its %s assertion (or give the assertion a value)", at, a.Type))
		}
	}
	return probs
}

// check reports what is wrong with an assertion at at.
func (a Assertion) check(at string) []string {
	at = fmt.Sprintf("%s (%s)", at, a.Type)
	var probs []string
	bad := func(format string, args ...any) { probs = append(probs, at+": "+fmt.Sprintf(format, args...)) }
	switch a.Type {
	case "equals", "equals_subset":
		if len(a.Value) > 0 && !json.Valid(a.Value) {
			bad("value is not JSON")
		}
	case "contains", "not_contains":
		if _, err := a.text(); err != nil {
			bad("value: %v", err)
		}
	case "regex":
		s, err := a.text()
		if err == nil {
			_, err = regexp.Compile(s)
		}
		if err != nil {
			bad("value: %v", err)
		}
	case "json_schema":
		if _, err := schema.Compile(a.Value); err != nil {
			bad("value: %v", err)
		}
	case "enum":
		var allowed []any
		if err := json.Unmarshal(a.Value, &allowed); err != nil || len(allowed) == 0 {
			bad("value: want the allowed values, a list")
		}
	case "tool_called", "tool_not_called":
		if a.Tool == "" {
			bad("tool is required")
		}
		if len(a.Args) > 0 {
			var args map[string]any
			if json.Unmarshal(a.Args, &args) != nil {
				bad("args: want a JSON object, a subset of the call's arguments")
			}
		}
	case "outcome", "terminate_reason":
		known := outcomes
		if a.Type == "terminate_reason" {
			known = reasons
		}
		if s, err := a.text(); err != nil || !slices.Contains(known, s) {
			bad("value %s: want one of %s", a.Value, strings.Join(known, ", "))
		}
	case "max_steps", "max_cost_usd", "max_latency_ms":
		if v, err := a.number(); err != nil || v < 0 {
			bad("value: want a number of 0 or more")
		}
	case "judge":
		if a.Agent == "" {
			bad("agent is required (the judge agent, NAME[@VERSION])")
		}
		if a.Rubric == "" {
			bad("rubric is required")
		}
		if a.MinScore != nil && (*a.MinScore < 0 || *a.MinScore > 1) {
			bad("min_score %v is outside 0..1", *a.MinScore)
		}
	case "":
		bad("type is required")
	default:
		bad("unknown type (want equals, equals_subset, contains, not_contains, regex, json_schema, enum, tool_called, tool_not_called, outcome, terminate_reason, max_steps, max_cost_usd, max_latency_ms or judge)")
	}
	return probs
}

// The values outcome and terminate_reason assertions may name.
var (
	outcomes = []string{"success", "error", "partial", "clarify", "confirm", "replan", "loop_back", "terminate", "skip"}
	reasons  = []string{"completed", "max_turns", "timeout", "aborted", "budget_exceeded", "error", "awaiting_approval"}
)

// text is the assertion's value as a string.
func (a Assertion) text() (string, error) {
	var s string
	if err := json.Unmarshal(a.Value, &s); err != nil {
		return "", errors.New("want a string")
	}
	return s, nil
}

// number is the assertion's value as a number.
func (a Assertion) number() (float64, error) {
	var v float64
	if err := json.Unmarshal(a.Value, &v); err != nil {
		return 0, errors.New("want a number")
	}
	return v, nil
}
