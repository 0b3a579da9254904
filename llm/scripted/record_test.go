package scripted

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/agentry/agentry/llm"
)

func TestRecordAndReplay(t *testing.T) {
	t.Setenv("VENDOR_API_KEY", "super-secret-value-123")
	replies := []struct {
		resp *llm.Response
		err  error
	}{
		{nil, &llm.APIError{Kind: llm.KindRateLimited, Status: 429, Message: "slow down", RetryAfter: 7 * time.Millisecond}},
		{&llm.Response{Model: "gpt-4.1-2025-04-14", Content: "calling with super-secret-value-123", ToolCalls: []llm.ToolCall{
			{ID: "call_9", Name: "http_get", Arguments: json.RawMessage(`{"url":"https://x.dev","headers":{"Authorization":"Bearer abcdefghijklmnopqrstuvwxyz"}}`)}},
			Usage: llm.Usage{PromptTokens: 100, CompletionTokens: 20, TotalTokens: 120, CachedPromptTokens: 64}}, nil},
		{&llm.Response{Model: "gpt-4.1-2025-04-14", Content: "done, key sk-proj-abcdefghijklmnopqrstuvwx"}, nil},
	}
	n := 0
	live := Func(func(context.Context, *llm.Request) (*llm.Response, error) {
		r := replies[n]
		n++
		return r.resp, r.err
	})
	rec := NewRecorder()
	p := rec.Wrap(live)
	for range replies {
		p.Generate(context.Background(), &llm.Request{})
	}
	path := filepath.Join(t.TempDir(), "rec.json")
	os.WriteFile(path, nil, 0o644) // overwritten, and made the owner's only
	if err := rec.WriteFile(path); err != nil {
		t.Fatal(err)
	}
	if st, err := os.Stat(path); err != nil || st.Mode().Perm() != 0o600 {
		t.Errorf("the recording's mode: %v, %v; want 0600", st.Mode().Perm(), err)
	}
	data, _ := os.ReadFile(path)
	for _, secret := range []string{"super-secret-value-123", "abcdefghijklmnopqrstuvwxyz", "sk-proj-abcdefghijklmnopqrstuvwx"} {
		if strings.Contains(string(data), secret) {
			t.Errorf("the recording holds the secret %q:\n%s", secret, data)
		}
	}
	s, err := Load(path)
	if err != nil {
		t.Fatal(err)
	}
	m := s.Model()
	_, err = m.Generate(context.Background(), &llm.Request{})
	var ae *llm.APIError
	if !errors.As(err, &ae) || ae.Kind != llm.KindRateLimited || ae.Status != 429 || ae.RetryAfter != 7*time.Millisecond {
		t.Errorf("turn 1 = %#v", err)
	}
	r2, err := m.Generate(context.Background(), &llm.Request{})
	if err != nil || r2.ToolCalls[0].ID != "call_9" || r2.Usage != replies[1].resp.Usage || r2.Model != "gpt-4.1-2025-04-14" ||
		!strings.Contains(string(r2.ToolCalls[0].Arguments), "[REDACTED:secret]") || !json.Valid(r2.ToolCalls[0].Arguments) {
		t.Errorf("turn 2 = %+v %v", r2, err)
	}
	r3, _ := m.Generate(context.Background(), &llm.Request{})
	if r3.Content != "done, key [REDACTED:secret]" {
		t.Errorf("turn 3 = %q", r3.Content)
	}
}

func TestRecordStream(t *testing.T) {
	s, _ := Parse("s", []byte(`{"model": "m", "turns": [{"content": "streamed words here", "usage": {"prompt_tokens": 3, "completion_tokens": 3}}]}`))
	rec := NewRecorder()
	p := rec.Wrap(s.Model()).(llm.Streamer)
	chunks := 0
	resp, err := llm.Collect(p.Stream(context.Background(), &llm.Request{}), func(llm.Chunk) { chunks++ })
	if err != nil || resp.Content != "streamed words here" || chunks < 3 {
		t.Fatalf("%+v %v %d", resp, err, chunks)
	}
	f := rec.File()
	if len(f.Turns) != 1 || f.Turns[0].Content != "streamed words here" || f.Turns[0].Usage.TotalTokens != 6 || f.Model != "m" {
		t.Errorf("%+v", f)
	}
}
