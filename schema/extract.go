package schema

import (
	"bytes"
	"encoding/json"
	"errors"
	"strings"
)

// ErrNoJSON is returned by ExtractJSON when a reply holds no JSON object.
var ErrNoJSON = errors.New("no JSON object found in the reply")

// ExtractJSON finds the JSON object in a model's reply: the whole reply,
// else the first fenced block (```json or ```) that holds one, else the
// first balanced {...} in the prose that parses.
func ExtractJSON(reply string) (json.RawMessage, error) {
	t := strings.TrimSpace(reply)
	if isObject(t) {
		return json.RawMessage(t), nil
	}
	for rest := t; ; {
		i := strings.Index(rest, "```")
		if i < 0 {
			break
		}
		rest = rest[i+3:]
		nl := strings.IndexByte(rest, '\n')
		end := strings.Index(rest, "```")
		if end < 0 {
			break
		}
		body := rest[:end]
		if nl >= 0 && nl < end {
			// Drop the info string ("json") of the opening fence.
			if lang := strings.TrimSpace(rest[:nl]); lang == "" || !strings.ContainsAny(lang, "{[") {
				body = rest[nl+1 : end]
			}
		}
		if b := strings.TrimSpace(body); isObject(b) {
			return json.RawMessage(b), nil
		}
		rest = rest[end+3:]
	}
	for i := 0; i < len(t); i++ {
		if t[i] != '{' {
			continue
		}
		if end := matchBrace(t, i); end > 0 && isObject(t[i:end]) {
			return json.RawMessage(t[i:end]), nil
		}
	}
	return nil, ErrNoJSON
}

func isObject(s string) bool {
	return len(s) >= 2 && s[0] == '{' && json.Valid([]byte(s))
}

// matchBrace returns the index after the brace that closes s[start], or -1.
func matchBrace(s string, start int) int {
	depth, inStr, esc := 0, false, false
	for i := start; i < len(s); i++ {
		c := s[i]
		switch {
		case esc:
			esc = false
		case inStr && c == '\\':
			esc = true
		case c == '"':
			inStr = !inStr
		case inStr:
		case c == '{':
			depth++
		case c == '}':
			depth--
			if depth == 0 {
				return i + 1
			}
		}
	}
	return -1
}

// Decode decodes JSON the way Validate expects values: numbers as
// json.Number, so integers stay exact.
func Decode(data []byte) (any, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, err
	}
	return v, nil
}
