// Package react is the text ReAct protocol of the Noema agent spec: the
// versioned system prompt (Thought / Action / Action Input / Final Answer)
// and the parser that reads a model's reply, forgiving what can be
// forgiven and naming what cannot.
package react

import (
	"encoding/json"
	"regexp"
	"strings"

	"github.com/agentry/agentry/schema"
)

// Reply is a parsed model reply: a thought, and either one action or a
// final answer.
type Reply struct {
	Thought string
	// Action is the tool to call, with its JSON Input.
	Action string
	Input  json.RawMessage
	// Final is set when the reply gives the final answer, Answer.
	Final  bool
	Answer string
	// Notes list what the parser forgave ("2 actions: only the first runs").
	Notes []string
}

// ParseError is a reply that cannot be used; Problem says why, in words
// the model is shown.
type ParseError struct {
	Problem string
}

func (e *ParseError) Error() string { return "unusable reply: " + e.Problem }

var labels = regexp.MustCompile(`(?im)^[ \t>*_#-]*(thought|action input|action|observation|final answer)[ \t*_]*:[ \t*_]*`)

type section struct {
	label string
	text  string
	start int
}

// Parse reads a reply. It accepts labels in any case, with markdown
// decoration (**Action:**), fenced replies and fenced JSON, trailing
// chatter after the JSON input, and a missing Action Input (taken as {}).
// It stops at a hallucinated "Observation:", runs only the first of
// several actions, and when a reply has both an action and a final answer
// it takes whichever comes first. A reply with neither, an action without
// a tool name, or an input that is not JSON is a *ParseError; a reply
// with no label at all keeps its text as the Thought.
func Parse(text string) (Reply, error) {
	text = unfence(strings.ReplaceAll(text, "\r\n", "\n"))
	locs := labels.FindAllStringSubmatchIndex(text, -1)
	if len(locs) == 0 {
		// What the model wrote is still its reasoning: kept as the thought.
		return Reply{Thought: strings.TrimSpace(text)}, &ParseError{Problem: "the reply has no Thought, Action or Final Answer; answer in the format you were given"}
	}
	var secs []section
	for i, l := range locs {
		end := len(text)
		if i+1 < len(locs) {
			end = locs[i+1][0]
		}
		secs = append(secs, section{label: strings.ToLower(text[l[2]:l[3]]), text: strings.TrimSpace(text[l[1]:end]), start: l[0]})
	}
	var r Reply
	preamble := strings.TrimSpace(text[:locs[0][0]])
	actions := 0
	for i, s := range secs {
		switch s.label {
		case "thought":
			if r.Thought == "" {
				r.Thought = s.text
			}
		case "final answer":
			if r.Action == "" && !r.Final {
				r.Final, r.Answer = true, unfence(s.text)
			}
		case "action":
			actions++
			if actions > 1 || r.Final {
				continue
			}
			name := strings.Trim(firstLine(s.text), "`\"' *_")
			if name == "" {
				return r, &ParseError{Problem: "the Action line names no tool"}
			}
			r.Action = name
			r.Input = nil
			if i+1 < len(secs) && secs[i+1].label == "action input" {
				in, err := parseInput(secs[i+1].text)
				if err != nil {
					return r, err
				}
				r.Input = in
			} else if rest := strings.TrimSpace(strings.TrimPrefix(s.text, firstLine(s.text))); rest != "" {
				// Some models put the JSON right under the tool name.
				if in, err := parseInput(rest); err == nil {
					r.Input = in
				}
			}
			if r.Input == nil {
				r.Input = json.RawMessage("{}")
				r.Notes = append(r.Notes, "no Action Input was given; {} was used")
			}
		}
		if s.label == "observation" && (r.Action != "" || r.Final) {
			break
		}
	}
	if actions > 1 && r.Action != "" {
		r.Notes = append(r.Notes, "the reply has several actions; only the first one runs")
	}
	if r.Thought == "" {
		r.Thought = preamble
	}
	if r.Action == "" && !r.Final {
		return r, &ParseError{Problem: "the reply has neither an Action nor a Final Answer"}
	}
	return r, nil
}

// parseInput reads an Action Input: JSON, possibly fenced, possibly
// followed by chatter.
func parseInput(s string) (json.RawMessage, error) {
	s = strings.TrimSpace(unfence(s))
	if s == "" {
		return json.RawMessage("{}"), nil
	}
	if json.Valid([]byte(s)) {
		if s[0] != '{' {
			return nil, &ParseError{Problem: "the Action Input must be a JSON object, got " + truncate(s, 60)}
		}
		return json.RawMessage(s), nil
	}
	if js, err := schema.ExtractJSON(s); err == nil && strings.HasPrefix(s, "{") {
		return js, nil
	}
	var v any
	err := json.Unmarshal([]byte(s), &v)
	return nil, &ParseError{Problem: "the Action Input is not valid JSON (" + err.Error() + "): " + truncate(s, 80)}
}

// unfence removes a markdown code fence around the whole of s.
func unfence(s string) string {
	t := strings.TrimSpace(s)
	if !strings.HasPrefix(t, "```") {
		return s
	}
	body := t[3:]
	if nl := strings.IndexByte(body, '\n'); nl >= 0 {
		body = body[nl+1:]
	} else {
		return s
	}
	if end := strings.LastIndex(body, "```"); end >= 0 {
		return strings.TrimSpace(body[:end])
	}
	return strings.TrimSpace(body)
}

func firstLine(s string) string {
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		return strings.TrimSpace(s[:i])
	}
	return strings.TrimSpace(s)
}

func truncate(s string, n int) string {
	s = strings.Join(strings.Fields(s), " ")
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}
