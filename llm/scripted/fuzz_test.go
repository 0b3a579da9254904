package scripted

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/agentry/agentry/llm"
)

// FuzzParse: any bytes give a script or an error that names it, never a
// panic; a script that parses plays every turn (each a response or an
// error) and then reports ErrExhausted.
func FuzzParse(f *testing.F) {
	seeds, _ := filepath.Glob("testdata/*.json")
	for _, p := range seeds {
		if data, err := os.ReadFile(p); err == nil {
			f.Add(data)
		}
	}
	f.Add([]byte(`{"turns": [{"tool_calls": [{"name": "add", "arguments": {"a": 1}}], "usage": {"prompt_tokens": 3}},
		{"error": {"status": 429, "message": "slow down", "retry_after_ms": 20}}, {"content": "done", "delay_ms": 5}]}`))
	f.Add([]byte(`{"model": "m", "turns": [{"content": "{\"a\": 1}", "thinking": "hm"}]}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		s, err := Parse("fuzz.json", data)
		if err != nil {
			if s != nil || err.Error() == "" {
				t.Fatalf("error %v with script %v", err, s)
			}
			return
		}
		for i := range s.steps {
			s.steps[i].delay = 0 // the fuzzer's delays would only make it wait
		}
		ctx := context.Background()
		m := s.Model()
		for range s.Len() {
			resp, err := m.Generate(ctx, &llm.Request{})
			if (resp == nil) == (err == nil) {
				t.Fatalf("response %v and error %v", resp, err)
			}
		}
		if _, err := m.Generate(context.Background(), &llm.Request{}); !errors.Is(err, ErrExhausted) {
			t.Fatalf("past the last turn: %v", err)
		}
	})
}
