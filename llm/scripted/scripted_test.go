package scripted

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/agentry/agentry/llm"
	"github.com/agentry/agentry/retry"
)

func TestDesignExample(t *testing.T) {
	s, err := Load("testdata/design.json")
	if err != nil {
		t.Fatal(err)
	}
	m := s.Model()
	ctx := context.Background()
	r1, err := m.Generate(ctx, &llm.Request{})
	if err != nil {
		t.Fatal(err)
	}
	if len(r1.ToolCalls) != 1 || r1.ToolCalls[0].Name != "add" || string(r1.ToolCalls[0].Arguments) != `{"a": 1, "b": 2}` || r1.ToolCalls[0].ID != "call_1_1" {
		t.Errorf("turn 1 = %+v", r1.ToolCalls)
	}
	if r1.Usage.TotalTokens != 17 {
		t.Errorf("usage = %+v", r1.Usage)
	}
	_, err = m.Generate(ctx, &llm.Request{})
	var ae *llm.APIError
	if !errors.As(err, &ae) || ae.Kind != llm.KindRateLimited || ae.RetryAfter != 20*time.Millisecond || ae.Message != "slow down" {
		t.Errorf("turn 2 err = %#v", err)
	}
	r3, err := m.Generate(ctx, &llm.Request{})
	if err != nil || r3.Content != "The answer is 3." {
		t.Errorf("turn 3 = %+v, %v", r3, err)
	}
	_, err = m.Generate(ctx, &llm.Request{})
	if !errors.Is(err, ErrExhausted) || !strings.Contains(err.Error(), "call 4 but the script has only 3 turns") {
		t.Errorf("call past the end = %v", err)
	}
	if m.Calls() != 4 {
		t.Errorf("Calls() = %d", m.Calls())
	}
}

func TestRetryWrapperSeesNextTurn(t *testing.T) {
	s, err := Load("testdata/design.json")
	if err != nil {
		t.Fatal(err)
	}
	p := llm.Retry(retry.Policy{Attempts: 3})(s.Model())
	ctx := context.Background()
	if _, err := p.Generate(ctx, &llm.Request{}); err != nil {
		t.Fatal(err)
	}
	retries := 0
	ctx = llm.WithTrace(ctx, &llm.TraceFuncs{OnRetry: func(llm.RetryInfo) { retries++ }})
	r, err := p.Generate(ctx, &llm.Request{})
	if err != nil || r.Content != "The answer is 3." || retries != 1 {
		t.Fatalf("after the 429: %+v, %v, %d retries", r, err, retries)
	}
}

func TestParseErrors(t *testing.T) {
	tests := []struct{ name, body, want string }{
		{"unknown field", `{"turns": [{"contnet": "x"}]}`, `unknown field "contnet"`},
		{"no turns", `{}`, `missing "turns"`},
		{"empty turn", `{"turns": [{}]}`, "turn 1: a turn needs content, tool_calls or error"},
		{"error with content", `{"turns": [{"content": "x", "error": {"message": "m"}}]}`, "turn 1: an error turn cannot also have"},
		{"error without message", `{"turns": [{"error": {"status": 500}}]}`, "needs a message"},
		{"bad status", `{"turns": [{"error": {"status": 200, "message": "m"}}]}`, "status 200"},
		{"bad kind", `{"turns": [{"error": {"kind": "grumpy", "message": "m"}}]}`, `unknown error kind "grumpy"`},
		{"negative delay", `{"turns": [{"content": "x", "delay_ms": -1}]}`, "delay_ms -1 is negative"},
		{"nameless call", `{"turns": [{"tool_calls": [{"arguments": {}}]}]}`, "tool call 1 has no name"},
		{"not JSON", `{"turns": [`, "unexpected EOF"},
		{"trailing", `{"turns": [{"content": "x"}]} {}`, "data after"},
		{"negative usage", `{"turns": [{"content": "x", "usage": {"prompt_tokens": -1}}]}`, "negative"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Parse("s.json", []byte(tt.body))
			if err == nil || !strings.Contains(err.Error(), tt.want) || !strings.Contains(err.Error(), "s.json") {
				t.Errorf("err = %v, want it to name s.json and say %q", err, tt.want)
			}
		})
	}
}

func TestErrorKinds(t *testing.T) {
	s, err := Parse("k", []byte(`{"turns": [
		{"error": {"message": "default"}},
		{"error": {"status": 401, "message": "who are you"}},
		{"error": {"kind": "context_too_long", "message": "too long"}}]}`))
	if err != nil {
		t.Fatal(err)
	}
	m := s.Model()
	for _, want := range []error{llm.ErrTransient, llm.ErrAuth, llm.ErrContextTooLong} {
		if _, err := m.Generate(context.Background(), &llm.Request{}); !errors.Is(err, want) {
			t.Errorf("err = %v, want %v", err, want)
		}
	}
}

func TestDelayHonoursContext(t *testing.T) {
	s, err := Parse("slow", []byte(`{"turns": [{"content": "late", "delay_ms": 60000}]}`))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := s.Model().Generate(ctx, &llm.Request{}); !errors.Is(err, context.Canceled) {
		t.Errorf("err = %v", err)
	}
}

// TestChunkDelay: a turn's streamed pieces come chunk_delay_ms apart (at
// least), and a context that ends between them ends the stream with its
// error.
func TestChunkDelay(t *testing.T) {
	s, err := Parse("paced", []byte(`{"turns": [{"content": "one two three", "chunk_delay_ms": 30}, {"content": "one two three", "chunk_delay_ms": 60000}]}`))
	if err != nil {
		t.Fatal(err)
	}
	m := s.Model()
	var at []time.Time
	if _, err := llm.Collect(m.Stream(context.Background(), &llm.Request{}), func(llm.Chunk) { at = append(at, time.Now()) }); err != nil {
		t.Fatal(err)
	}
	if len(at) < 3 || at[len(at)-1].Sub(at[0]) < time.Duration(len(at)-1)*30*time.Millisecond {
		t.Errorf("%d pieces within %v", len(at), at[len(at)-1].Sub(at[0]))
	}
	ctx, cancel := context.WithCancel(context.Background())
	_, err = llm.Collect(m.Stream(ctx, &llm.Request{}), func(llm.Chunk) { cancel() })
	if !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled between pieces: %v", err)
	}
	if _, err := Parse("bad", []byte(`{"turns": [{"content": "x", "chunk_delay_ms": -1}]}`)); err == nil || !strings.Contains(err.Error(), "chunk_delay_ms -1") {
		t.Errorf("a negative delay: %v", err)
	}
}

func TestStreamMatchesGenerate(t *testing.T) {
	s, err := Parse("st", []byte(`{"model": "gpt-4.1-mini", "turns": [
		{"content": "Héllo wörld, twice over", "tool_calls": [{"id": "x", "name": "t", "arguments": {"q": "ünï"}}],
		 "usage": {"prompt_tokens": 3, "completion_tokens": 2}}]}`))
	if err != nil {
		t.Fatal(err)
	}
	want, _ := s.Model().Generate(context.Background(), &llm.Request{})
	chunks := 0
	got, err := llm.Collect(s.Model().Stream(context.Background(), &llm.Request{}), func(llm.Chunk) { chunks++ })
	if err != nil {
		t.Fatal(err)
	}
	if got.Content != want.Content || len(got.ToolCalls) != 1 || string(got.ToolCalls[0].Arguments) != string(want.ToolCalls[0].Arguments) ||
		got.Usage != want.Usage || got.Model != "gpt-4.1-mini" {
		t.Errorf("stream %+v != generate %+v", got, want)
	}
	if chunks < 5 {
		t.Errorf("only %d chunks: the text should arrive in pieces", chunks)
	}
}

func TestOpenResolvesRelativePath(t *testing.T) {
	m, err := llm.Open("scripted:design.json", llm.Config{Dir: "testdata"})
	if err != nil {
		t.Fatal(err)
	}
	if m.ProviderName != "scripted" || m.ID != "design.json" {
		t.Errorf("provider %q model %q", m.ProviderName, m.ID)
	}
	if _, err := m.Provider.Generate(context.Background(), &llm.Request{}); err != nil {
		t.Error(err)
	}
	if _, err := llm.Open("scripted:missing.json", llm.Config{Dir: "testdata"}); err == nil || !strings.Contains(err.Error(), "missing.json") {
		t.Errorf("missing file: %v", err)
	}
}

func TestFunc(t *testing.T) {
	var seen *llm.Request
	f := Func(func(_ context.Context, r *llm.Request) (*llm.Response, error) {
		seen = r
		return &llm.Response{Content: "hi " + r.Messages[0].Content}, nil
	})
	r, err := f.Generate(context.Background(), &llm.Request{Messages: []llm.Message{{Role: llm.RoleUser, Content: "there"}}})
	if err != nil || r.Content != "hi there" || seen == nil {
		t.Errorf("%+v %v", r, err)
	}
}

// A script written in Go takes tool call arguments as Go values: a
// struct, a map or JSON bytes, each encoded as the model would write it.
func TestScriptInGo(t *testing.T) {
	type addArgs struct {
		A int `json:"a"`
		B int `json:"b"`
	}
	s, err := New("go",
		Turn{ToolCalls: []ToolCall{
			{Name: "add", Arguments: addArgs{A: 1, B: 2}},
			{Name: "echo", Arguments: map[string]any{"text": "hi"}},
			{Name: "raw", Arguments: json.RawMessage(`{"x": 1}`)},
			{Name: "none"},
		}},
		Turn{Content: "3"})
	if err != nil {
		t.Fatal(err)
	}
	resp, err := s.Model().Generate(context.Background(), &llm.Request{})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, c := range resp.ToolCalls {
		got = append(got, c.Name+string(c.Arguments))
	}
	if want := `add{"a":1,"b":2} echo{"text":"hi"} raw{"x": 1} none{}`; strings.Join(got, " ") != want {
		t.Errorf("calls %s, want %s", strings.Join(got, " "), want)
	}
	if _, err := New("bad", Turn{ToolCalls: []ToolCall{{Name: "f", Arguments: func() {}}}}); err == nil ||
		!strings.Contains(err.Error(), "turn 1") || !strings.Contains(err.Error(), "tool call 1 (f): arguments") {
		t.Errorf("arguments that do not encode: %v", err)
	}
}

// TestLoadRefusesWhatIsNoFile: a FIFO (which would hold the reader until
// a writer comes), a directory and a file over the cap are refused at
// once, each named.
func TestLoadRefusesWhatIsNoFile(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, "fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	big := filepath.Join(dir, "big.json")
	f, err := os.Create(big)
	if err != nil {
		t.Fatal(err)
	}
	f.Truncate(MaxScriptBytes + 1)
	f.Close()
	for _, tc := range []struct{ path, says string }{
		{fifo, "not a regular file"}, {dir, "not a regular file"}, {big, "over the"},
	} {
		if _, err := Load(tc.path); err == nil || !strings.Contains(err.Error(), tc.says) {
			t.Errorf("Load(%s) = %v, want an error saying %q", tc.path, err, tc.says)
		}
	}
}
