package react

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

func TestParse(t *testing.T) {
	tests := []struct {
		name   string
		in     string
		want   Reply
		note   string
		errMsg string
	}{
		{name: "action", in: "Thought: I need the card.\nAction: get-card\nAction Input: {\"cardId\": \"card_123\"}",
			want: Reply{Thought: "I need the card.", Action: "get-card", Input: []byte(`{"cardId": "card_123"}`)}},
		{name: "final text", in: "Thought: I have all the information\nFinal Answer: The card is due tomorrow.",
			want: Reply{Thought: "I have all the information", Final: true, Answer: "The card is due tomorrow."}},
		{name: "final JSON", in: "Thought: done\nFinal Answer: {\"next\": \"card_7\"}",
			want: Reply{Thought: "done", Final: true, Answer: `{"next": "card_7"}`}},
		{name: "multi-line thought and answer", in: "Thought: first\nsecond line\nFinal Answer: line one\nline two",
			want: Reply{Thought: "first\nsecond line", Final: true, Answer: "line one\nline two"}},
		{name: "lower case and markdown", in: "**thought:** check it\n**action:** `search`\n**action input:** {\"q\": \"go\"}",
			want: Reply{Thought: "check it", Action: "search", Input: []byte(`{"q": "go"}`)}},
		{name: "fenced reply", in: "```\nThought: t\nAction: search\nAction Input: {\"q\": 1}\n```",
			want: Reply{Thought: "t", Action: "search", Input: []byte(`{"q": 1}`)}},
		{name: "fenced input", in: "Thought: t\nAction: search\nAction Input:\n```json\n{\"q\": 1}\n```",
			want: Reply{Thought: "t", Action: "search", Input: []byte(`{"q": 1}`)}},
		{name: "trailing chatter", in: "Thought: t\nAction: search\nAction Input: {\"q\": \"a}b\"} and then I will see.",
			want: Reply{Thought: "t", Action: "search", Input: []byte(`{"q": "a}b"}`)}},
		{name: "missing input", in: "Thought: list them\nAction: kv_list",
			want: Reply{Thought: "list them", Action: "kv_list", Input: []byte(`{}`)}, note: "no Action Input"},
		{name: "hallucinated observation", in: "Thought: t\nAction: search\nAction Input: {\"q\": 1}\nObservation: 42 results\nThought: great\nFinal Answer: 42",
			want: Reply{Thought: "t", Action: "search", Input: []byte(`{"q": 1}`)}},
		{name: "action then final", in: "Thought: t\nAction: a\nAction Input: {}\nFinal Answer: guessed",
			want: Reply{Thought: "t", Action: "a", Input: []byte(`{}`)}},
		{name: "final then action", in: "Thought: t\nFinal Answer: done\nAction: a\nAction Input: {}",
			want: Reply{Thought: "t", Final: true, Answer: "done"}},
		{name: "several actions", in: "Thought: t\nAction: a\nAction Input: {\"x\": 1}\nAction: b\nAction Input: {\"y\": 2}",
			want: Reply{Thought: "t", Action: "a", Input: []byte(`{"x": 1}`)}, note: "only the first one runs"},
		{name: "no thought label", in: "Let me look.\nAction: a\nAction Input: {}",
			want: Reply{Thought: "Let me look.", Action: "a", Input: []byte(`{}`)}},
		{name: "CRLF", in: "Thought: t\r\nFinal Answer: ok\r\n", want: Reply{Thought: "t", Final: true, Answer: "ok"}},
		{name: "invalid JSON", in: "Thought: t\nAction: a\nAction Input: {q: 1}", errMsg: "not valid JSON"},
		{name: "input not an object", in: "Thought: t\nAction: a\nAction Input: [1, 2]", errMsg: "must be a JSON object"},
		{name: "empty action", in: "Thought: t\nAction: \nAction Input: {}", errMsg: "names no tool"},
		{name: "no labels", in: "I think the answer is 4.", errMsg: "no Thought, Action or Final Answer"},
		{name: "thought only", in: "Thought: hmm, let me think more.", errMsg: "neither an Action nor a Final Answer"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Parse(tt.in)
			if tt.errMsg != "" {
				var pe *ParseError
				if !errors.As(err, &pe) || !strings.Contains(pe.Problem, tt.errMsg) {
					t.Fatalf("err = %v, want a ParseError about %q", err, tt.errMsg)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got.Thought != tt.want.Thought || got.Action != tt.want.Action || string(got.Input) != string(tt.want.Input) ||
				got.Final != tt.want.Final || got.Answer != tt.want.Answer {
				t.Errorf("got %+v\nwant %+v", got, tt.want)
			}
			if tt.note != "" && !strings.Contains(strings.Join(got.Notes, "|"), tt.note) {
				t.Errorf("notes %q lack %q", got.Notes, tt.note)
			}
		})
	}
}

func FuzzParse(f *testing.F) {
	for _, s := range []string{
		"Thought: t\nAction: a\nAction Input: {\"x\": 1}",
		"Thought: t\nFinal Answer: done",
		"```\nAction: a\n```",
		"Action Input: {",
		"**Final Answer:** ```json\n{}\n```",
		"Observation: x\nAction: y",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		r, err := Parse(s)
		if err != nil {
			var pe *ParseError
			if !errors.As(err, &pe) || pe.Problem == "" {
				t.Fatalf("Parse(%q) error %v is not a ParseError", s, err)
			}
			return
		}
		if r.Action == "" && !r.Final {
			t.Fatalf("Parse(%q) = %+v: neither action nor answer without error", s, r)
		}
		if r.Action != "" && r.Final {
			t.Fatalf("Parse(%q) = %+v: both action and answer", s, r)
		}
		if r.Action != "" && (len(r.Input) == 0 || r.Input[0] != '{') {
			t.Fatalf("Parse(%q) input %q is not an object", s, r.Input)
		}
	})
}

// TestParseVendorReplies: replies shaped as real models write them, with
// their quirks (no Thought, prose around the labels, fenced JSON, an
// Action Input over several lines, markdown labels, an Observation the
// model invented, a fenced Final Answer), each in testdata/replies with
// what it must parse to in expect.json.
func TestParseVendorReplies(t *testing.T) {
	data, err := os.ReadFile("testdata/replies/expect.json")
	if err != nil {
		t.Fatal(err)
	}
	var expect map[string]struct {
		Action  string          `json:"action"`
		Input   json.RawMessage `json:"input"`
		Final   string          `json:"final"`
		Thought string          `json:"thought"`
	}
	if err := json.Unmarshal(data, &expect); err != nil {
		t.Fatal(err)
	}
	files, _ := filepath.Glob("testdata/replies/*.txt")
	if len(files) != len(expect) {
		t.Fatalf("%d replies, %d expectations", len(files), len(expect))
	}
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			want, ok := expect[filepath.Base(f)]
			if !ok {
				t.Fatal("no expectation")
			}
			text, _ := os.ReadFile(f)
			r, err := Parse(string(text))
			if err != nil {
				t.Fatal(err)
			}
			if r.Thought != want.Thought || r.Action != want.Action || (want.Final != "") != r.Final || r.Answer != want.Final {
				t.Errorf("parsed %+v, want %+v", r, want)
			}
			if want.Action != "" {
				var got, exp any
				json.Unmarshal(r.Input, &got)
				json.Unmarshal(want.Input, &exp)
				if !reflect.DeepEqual(got, exp) {
					t.Errorf("input %s, want %s", r.Input, want.Input)
				}
			}
		})
	}
}
