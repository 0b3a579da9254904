package llm

import (
	"encoding/json"
	"errors"
	"reflect"
	"testing"
)

func TestCollectPieces(t *testing.T) {
	broke := errors.New("broke")
	call := func(i int, args string) Chunk { return Chunk{ToolCall: &ToolCallDelta{Index: i, Arguments: args}} }
	tests := []struct {
		name    string
		chunks  []Chunk
		err     error
		content string
		args    []string
	}{
		{"nothing", nil, nil, "", nil},
		{"one piece of text", []Chunk{{Text: "hello"}}, nil, "hello", nil},
		{"two pieces", []Chunk{{Text: "hel"}, {Text: "lo"}}, nil, "hello", nil},
		{"many pieces, some empty", []Chunk{{Text: "a"}, {}, {Text: "b"}, {Text: "c"}, {Text: "dddddddddddddddd"}}, nil, "abcdddddddddddddddd", nil},
		{"arguments in one fragment", []Chunk{call(0, `{"a":1}`)}, nil, "", []string{`{"a":1}`}},
		{"arguments in two", []Chunk{call(0, `{"a"`), call(0, `:1}`)}, nil, "", []string{`{"a":1}`}},
		{"arguments in many", []Chunk{call(0, `{`), call(0, `"a"`), call(0, `:`), call(0, `12345678901234567890`), call(0, `}`)}, nil, "", []string{`{"a":12345678901234567890}`}},
		{"no arguments", []Chunk{{ToolCall: &ToolCallDelta{Index: 0, Name: "now"}}}, nil, "", []string{`{}`}},
		{"calls interleaved", []Chunk{call(1, `{"b"`), call(0, `{}`), call(1, `:2}`), call(2, `{"c":3}`)}, nil, "", []string{`{}`, `{"b":2}`, `{"c":3}`}},
		{"a broken stream keeps what came", []Chunk{{Text: "par"}, {Text: "tial"}, call(0, `{"a"`)}, broke, "partial", []string{`{"a"`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			seq := func(yield func(Chunk, error) bool) {
				for _, c := range tt.chunks {
					if !yield(c, nil) {
						return
					}
				}
				if tt.err != nil {
					yield(Chunk{}, tt.err)
				}
			}
			resp, err := Collect(seq, nil)
			if !errors.Is(err, tt.err) {
				t.Fatalf("err = %v, want %v", err, tt.err)
			}
			if resp.Content != tt.content {
				t.Errorf("content %q, want %q", resp.Content, tt.content)
			}
			var args []string
			for _, c := range resp.ToolCalls {
				if !json.Valid(c.Arguments) && tt.err == nil {
					t.Errorf("arguments %s are not JSON", c.Arguments)
				}
				args = append(args, string(c.Arguments))
			}
			if !reflect.DeepEqual(args, tt.args) {
				t.Errorf("arguments %q, want %q", args, tt.args)
			}
		})
	}
}

// TestCollectOwnsItsBytes: chunks that share one buffer do not change what
// was collected from them.
func TestCollectOwnsItsBytes(t *testing.T) {
	buf := []byte(`{"a":`)
	seq := func(yield func(Chunk, error) bool) {
		_ = yield(Chunk{Text: "x", ToolCall: &ToolCallDelta{Arguments: string(buf)}}, nil) &&
			yield(Chunk{Text: "y", ToolCall: &ToolCallDelta{Arguments: "1}"}}, nil)
	}
	resp, err := Collect(seq, nil)
	if err != nil {
		t.Fatal(err)
	}
	copy(buf, "XXXXX")
	if string(resp.ToolCalls[0].Arguments) != `{"a":1}` || resp.Content != "xy" {
		t.Errorf("got %q and %s", resp.Content, resp.ToolCalls[0].Arguments)
	}
}
