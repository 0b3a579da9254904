package prompt

import (
	"encoding/json"
	"errors"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite the golden files")

const a2Schema = `{"type": "object", "required": ["system", "audience", "tone", "response_depth", "confidence"],
 "properties": {
  "system": {"type": "string", "enum": ["Python_Programmer", "AWS_Architect", "Friend"]},
  "audience": {"type": "string", "enum": ["Developer", "Manager", "Friend", "Self"]},
  "tone": {"type": "string", "enum": ["direct", "friendly", "formal"]},
  "response_depth": {"type": "string", "enum": ["short", "detailed", "exhaustive"]},
  "confidence": {"type": "string", "enum": ["low", "medium", "high"]}}}`

var configs = map[string]Config{
	"chooser": {AgentName: "A2", Version: "v1", Mode: "Chooser",
		SystemText:   "You are A2 PromptShaper.",
		PurposeText:  "You must inspect task/purpose/context and choose labels for system, audience, tone, response_depth, confidence.",
		OutputSchema: json.RawMessage(a2Schema),
		Enums: map[string][]string{"system": {"Python_Programmer", "AWS_Architect", "Friend"}, "audience": {"Developer", "Manager", "Friend", "Self"},
			"tone": {"direct", "friendly", "formal"}, "response_depth": {"short", "detailed", "exhaustive"}, "confidence": {"low", "medium", "high"}},
		Defaults:  map[string]any{"tone": "direct", "response_depth": "detailed", "confidence": "medium"},
		InputKeys: []string{"task", "purpose", "context"}},
	"writer": {AgentName: "Summariser", Version: "v2", Mode: "writer",
		SystemText: "You write release notes.", PurposeText: "Summarise the change for its audience.",
		OutputSchema: json.RawMessage(`{"type": "object", "required": ["title", "summary"], "properties": {
			"title": {"type": "string", "description": "One line, under 60 characters."},
			"summary": {"type": "string", "description": "Two or three sentences."},
			"audience": {"type": "string", "enum": ["users", "operators"]}}}`)},
	"extractor": {AgentName: "Slots", Version: "v1", Mode: "extractor",
		SystemText: "You extract booking details.",
		OutputSchema: json.RawMessage(`{"type": "object", "required": ["city", "date"], "properties": {
			"city": {"type": "string"}, "date": {"type": "string", "format": "date"}, "guests": {"type": ["integer", "null"], "minimum": 1}}}`)},
}

var input = map[string]any{"task": "Explain \"closures\"\nin Go.", "purpose": "teach a junior developer", "context": "code review", "extra": 3}

func TestComposeGolden(t *testing.T) {
	for name, cfg := range configs {
		t.Run(name, func(t *testing.T) {
			p, err := New(cfg)
			if err != nil {
				t.Fatal(err)
			}
			msgs, format, err := p.Compose(input)
			if err != nil {
				t.Fatal(err)
			}
			got := "=== SYSTEM\n" + msgs[0].Content + "\n=== USER\n" + msgs[1].Content + "\n"
			path := filepath.Join("testdata", name+".golden")
			if *update {
				os.WriteFile(path, []byte(got), 0o644)
			}
			want, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			if got != string(want) {
				t.Errorf("composed:\n%s\nwant:\n%s", got, want)
			}
			if string(format) != string(cfg.OutputSchema) {
				t.Error("response format is not the output schema")
			}
			again, _, _ := p.Compose(input)
			if again[0].Content != msgs[0].Content || again[1].Content != msgs[1].Content {
				t.Error("composition is not deterministic")
			}
		})
	}
}

func TestParseAndValidate(t *testing.T) {
	p, err := New(configs["chooser"])
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		raw   string
		want  map[string]any
		probs []string
	}{
		{`{"system": "Friend", "audience": "Self"}`, map[string]any{"system": "Friend", "audience": "Self", "tone": "direct", "response_depth": "detailed", "confidence": "medium"}, nil},
		{"Here:\n```json\n{\"system\": \"AWS_Architect\", \"audience\": \"Manager\", \"tone\": \"formal\", \"response_depth\": \"short\", \"confidence\": \"high\"}\n```", map[string]any{"tone": "formal"}, nil},
		{`{"system": "Wizard", "audience": "Self"}`, nil, []string{"system: value must be one of"}},
		{`{"audience": "Self"}`, nil, []string{"missing property 'system'"}},
		{`{"system": 3, "audience": "Self", "tone": null}`, nil, []string{"system: got number, want string", "tone: got null, want string"}},
		{`I would pick Friend.`, nil, []string{"no JSON object found"}},
	}
	for _, tt := range tests {
		got, err := p.ParseAndValidate(tt.raw)
		if tt.probs == nil {
			if err != nil {
				t.Errorf("%s: %v", tt.raw, err)
				continue
			}
			for k, v := range tt.want {
				if got[k] != v {
					t.Errorf("%s: %s = %v, want %v", tt.raw, k, got[k], v)
				}
			}
			continue
		}
		var ve *ValidationError
		if !errors.As(err, &ve) {
			t.Fatalf("%s: err = %v", tt.raw, err)
		}
		msg := strings.Join(ve.Problems, "\n")
		for _, w := range tt.probs {
			if !strings.Contains(msg, w) {
				t.Errorf("%s: problems %q lack %q", tt.raw, msg, w)
			}
		}
	}
	p2, _ := New(configs["extractor"])
	if _, err := p2.ParseAndValidate(`{"city": "Oslo", "date": "next week"}`); err == nil || !strings.Contains(err.Error(), "date") {
		t.Errorf("format not asserted: %v", err)
	}
}

func TestNewErrors(t *testing.T) {
	if _, err := New(Config{AgentName: "x"}); err == nil {
		t.Error("no schema accepted")
	}
	if _, err := New(Config{OutputSchema: json.RawMessage(`{"type": 5}`)}); err == nil {
		t.Error("bad schema accepted")
	}
}

func TestInputLines(t *testing.T) {
	for _, tt := range []struct {
		name  string
		input map[string]any
		order []string
		want  string
	}{
		{"empty", map[string]any{}, []string{"a"}, ""},
		{"declared order first", map[string]any{"b": "x", "a": 1}, []string{"b", "a"}, "b = \"x\"\na = 1"},
		{"others sorted after", map[string]any{"z": true, "a": []int{1}, "m": "q\"uote"}, []string{"m"}, "m = \"q\\\"uote\"\na = [1]\nz = true"},
		{"absent and repeated keys", map[string]any{"a": nil}, []string{"x", "a", "a"}, "a = null"},
		{"not JSON", map[string]any{"c": make(chan int)}, nil, "c = "},
	} {
		t.Run(tt.name, func(t *testing.T) {
			got := InputLines(tt.input, tt.order)
			if tt.name == "not JSON" {
				if !strings.HasPrefix(got, tt.want) || len(got) == len(tt.want) {
					t.Errorf("got %q", got)
				}
				return
			}
			if got != tt.want {
				t.Errorf("got %q, want %q", got, tt.want)
			}
		})
	}
}

// TestEngineNotLinked: a Liquid template in a program that does not link
// the engine says which package to import, at Validate and at Render.
func TestEngineNotLinked(t *testing.T) {
	tm := Template{ID: "a", Version: "1", Engine: Liquid, Text: "{{ name }}"}
	const want = `import _ "github.com/agentry/agentry/prompt/liquid"`
	if probs := Validate(tm); len(probs) != 1 || !strings.Contains(probs[0], want) {
		t.Errorf("Validate = %q", probs)
	}
	if _, err := tm.Render(map[string]any{"name": "Ada"}, true); err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("Render = %v", err)
	}
}
