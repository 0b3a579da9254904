package schema

import (
	"errors"
	"testing"
)

func TestExtractJSON(t *testing.T) {
	tests := []struct{ in, want string }{
		{`{"a": 1}`, `{"a": 1}`},
		{"  \n{\"a\": 1}\n ", `{"a": 1}`},
		{"Here you go:\n```json\n{\"a\": 1}\n```\nAnything else?", `{"a": 1}`},
		{"```\n{\"a\": [1, 2]}\n```", `{"a": [1, 2]}`},
		{"```js\nnot json\n```\n```json\n{\"b\": true}\n```", `{"b": true}`},
		{`The labels are {"tone": "direct", "note": "use {braces}"} as asked.`, `{"tone": "direct", "note": "use {braces}"}`},
		{`First {not json} then {"ok": "yes \"quoted\" }"}`, `{"ok": "yes \"quoted\" }"}`},
		{`{"outer": {"inner": 1}} trailing`, `{"outer": {"inner": 1}}`},
	}
	for _, tt := range tests {
		got, err := ExtractJSON(tt.in)
		if err != nil || string(got) != tt.want {
			t.Errorf("ExtractJSON(%q) = %s, %v; want %s", tt.in, got, err, tt.want)
		}
	}
	for _, bad := range []string{"", "no json here", "[1, 2]", "{unclosed", "```json\n{bad}\n```"} {
		if _, err := ExtractJSON(bad); !errors.Is(err, ErrNoJSON) {
			t.Errorf("ExtractJSON(%q) err = %v", bad, err)
		}
	}
}

func FuzzExtractJSON(f *testing.F) {
	for _, s := range []string{`{"a":1}`, "```json\n{}\n```", `x {"a": "}"} y`, "{{{", "```"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		got, err := ExtractJSON(s)
		if err == nil && !isObject(string(got)) {
			t.Fatalf("ExtractJSON(%q) returned %q, not an object", s, got)
		}
	})
}
