package agent

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"

	"github.com/agentry/agentry/event"
	"github.com/agentry/agentry/internal/testdb"
	"github.com/agentry/agentry/llm"
	"github.com/agentry/agentry/tool"
)

// bigTool returns 2,000 bytes a call: a few calls outgrow a small window.
func bigTool() tool.Tool {
	return tool.Must(tool.Func("fetch", "Fetch a page.", func(_ context.Context, in echoArgs) (string, error) {
		return in.Text + strings.Repeat("x", 2000), nil
	}, tool.WithIdempotency(tool.Safe)))
}

// windowed is a model with a context window it enforces as a provider
// does (a context-length error past it), that asks for fetch n times and
// then answers; a "Summarise" request gets a summary.
type windowed struct {
	mu      sync.Mutex
	window  int
	n       int
	calls   int
	largest int
}

func (m *windowed) Generate(_ context.Context, req *llm.Request) (*llm.Response, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	est := tokens(req.Messages, req.Tools)
	m.largest = max(m.largest, est)
	if m.window > 0 && est > m.window {
		return nil, &llm.APIError{Kind: llm.KindContextTooLong, Status: 400, Message: "maximum context length exceeded"}
	}
	if strings.HasPrefix(req.Messages[0].Content, "Summarise") {
		return &llm.Response{Content: "The pages fetched so far were all x."}, nil
	}
	if m.calls++; m.calls <= m.n {
		return &llm.Response{ToolCalls: []llm.ToolCall{{ID: "c" + string(rune('a'+m.calls)), Name: "fetch",
			Arguments: []byte(`{"text": "page ` + string(rune('a'+m.calls)) + `"}`)}}}, nil
	}
	return &llm.Response{Content: "done"}, nil
}

// TestCompaction: a long run is compacted, not ended, by every strategy,
// whether the window is known (the spec's) or learned from the provider's
// error; the trace keeps every observation; a compaction event says what
// happened; off, or no room left, ends the run with context_too_long.
func TestCompaction(t *testing.T) {
	tests := []struct {
		name      string
		context   string
		enforce   int // the provider's window (0: none)
		wantErr   error
		wantInMsg string
	}{
		{"drop oldest, known window", `{"window": 3000}`, 3000, nil, "[dropped to fit the context window"},
		{"drop oldest, learned window", `{}`, 3000, nil, "[dropped to fit the context window"},
		{"summarize", `{"compaction": "summarize", "window": 3000, "keep_turns": 1}`, 3000, nil, "Summary of the earlier conversation"},
		{"off", `{"compaction": "off"}`, 3000, llm.ErrContextTooLong, ""},
		{"no room", `{"window": 600, "keep_turns": 3}`, 0, ErrContextTooLong, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := &windowed{window: tt.enforce, n: 8}
			a := newTestAgent(t, `{"agent_name": "c", "version": "v1", "model_name": "m", "system_text": "Fetch.", "tools": ["fetch"],
				"messages": [{"role": "user", "content": "I am Ada."}, {"role": "assistant", "content": "Hello Ada."}],
				"limits": {"max_turns": 12}, "context": `+tt.context+`}`, m, bigTool())
			var compactions []event.Event
			res, err := a.Run(context.Background(), map[string]any{"task": "fetch eight pages"},
				WithEvents(func(e event.Event) {
					if e.Type == event.Compaction {
						compactions = append(compactions, e)
					}
				}, event.Block()))
			if tt.wantErr != nil {
				if !errors.Is(err, tt.wantErr) || res.Error == nil || res.Error.Code != CodeContextTooLong {
					t.Fatalf("err = %v (%+v), want %v with code context_too_long", err, res.Error, tt.wantErr)
				}
				return
			}
			if err != nil || res.Result != "done" {
				t.Fatalf("%v: %v", err, res.Result)
			}
			if len(compactions) == 0 || compactions[0].Data["strategy"] == "" {
				t.Errorf("compaction events %+v", compactions)
			}
			// The system prompt, the history and the task are never compacted.
			if lead := res.Messages[:4]; lead[0].Content != "Fetch." || lead[1].Content != "I am Ada." ||
				lead[2].Content != "Hello Ada." || !strings.Contains(lead[3].Content, "fetch eight pages") {
				t.Errorf("the transcript's lead changed: %+v", lead)
			}
			var all strings.Builder
			for _, msg := range res.Messages {
				all.WriteString(msg.Content)
			}
			if !strings.Contains(all.String(), tt.wantInMsg) {
				t.Errorf("the transcript lacks %q", tt.wantInMsg)
			}
			if strings.Contains(tt.context, "window") && m.largest > 3000 {
				t.Errorf("with the window known, a request of about %d tokens was sent", m.largest)
			}
			if len(res.Steps) != 8 || len(res.Steps[0].Observation) < 2000 {
				t.Errorf("the trace lost what the tools said: %d steps", len(res.Steps))
			}
		})
	}
}

// TestCompactionReplays: a durable run that was compacted replays with no
// difference: compaction is part of the run, reproduced from its log.
func TestCompactionReplays(t *testing.T) {
	ctx := context.Background()
	st := openStore(t, testdb.SQLite(t))
	sp := `{"agent_name": "c", "version": "v1", "model_name": "m", "system_text": "Fetch.", "tools": ["fetch"],
		"limits": {"max_turns": 12}, "context": {"window": 3000}}`
	a := newTestAgent(t, sp, &windowed{window: 3000, n: 8}, bigTool())
	res, err := a.Run(ctx, map[string]any{"task": "fetch"}, WithStore(st))
	if err != nil {
		t.Fatal(err)
	}
	rep, err := newTestAgent(t, sp, &windowed{window: 3000, n: 8}, bigTool()).Replay(ctx, st, res.ID)
	if err != nil || len(rep.Differences) != 0 {
		t.Fatalf("%v: differences %+v", err, rep.Differences)
	}
	recs, _ := st.Records(ctx, res.ID, 0)
	found := false
	for _, r := range recs {
		if strings.Contains(string(r.Data), `"compaction"`) {
			found = true
		}
	}
	if !found {
		t.Error("the run log has no compaction record")
	}
}
