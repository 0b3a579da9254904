package agent

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/agentry/agentry/spec"
	"github.com/agentry/agentry/tool"
)

// TestRetryCounts: a model call is retried 3 times by default (four
// tries), max_retries counts retries and attempts tries, and giving both
// is refused.
func TestRetryCounts(t *testing.T) {
	busy := `{"error": {"status": 503, "message": "busy"}}`
	tests := []struct {
		name  string
		retry string
		tries int // the tries made before the run gives up
	}{
		{"default: three retries", `{"initial_backoff_ms": 1, "max_backoff_ms": 1}`, 4},
		{"max_retries", `{"max_retries": 1, "initial_backoff_ms": 1, "max_backoff_ms": 1}`, 2},
		{"no retry", `{"max_retries": 0}`, 1},
		{"attempts, the older spelling", `{"attempts": 2, "initial_backoff_ms": 1, "max_backoff_ms": 1}`, 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			turns := strings.Repeat(busy+",", 5) + busy
			a := newTestAgent(t, `{`+base+`, "retry": `+tt.retry+`}`, scriptModel(t, `{"turns": [`+turns+`]}`))
			res, err := a.Run(context.Background(), map[string]any{"who": "x"})
			if !errors.Is(err, ErrModel) || len(res.ModelCalls) != 1 || res.ModelCalls[0].Attempts != tt.tries {
				t.Errorf("%v: model calls %+v, want %d tries", err, res.ModelCalls, tt.tries)
			}
		})
	}
	if _, err := spec.Parse("x", []byte(`{`+base+`, "retry": {"max_retries": 2, "attempts": 3}}`)); err == nil ||
		!strings.Contains(err.Error(), "max_retries") || !strings.Contains(err.Error(), "attempts") {
		t.Errorf("max_retries and attempts together: %v", err)
	}
}

// TestRetryPerTool: a tool's own max_retries replaces tool_max_retries,
// a fatal tool's failure ends the run with its error, and a setting for
// a tool the agent lacks is refused.
func TestRetryPerTool(t *testing.T) {
	flaky := func(name string, n *atomic.Int32) tool.Tool {
		return tool.Must(tool.Func(name, "", func(context.Context, echoArgs) (string, error) {
			n.Add(1)
			return "", tool.Transient(errors.New("blip"))
		}, tool.WithIdempotency(tool.Idempotent)))
	}
	var nA, nB atomic.Int32
	m := &recorder{replies: []reply{calls(call("1", "fa", `{"text":""}`)), calls(call("2", "fb", `{"text":""}`)), answer("never")}}
	a := newTestAgent(t, `{`+base+`, "tools": ["fa", "fb"], "retry": {"tool_max_retries": 1, "initial_backoff_ms": 1, "max_backoff_ms": 1,
		"tools": {"fb": {"max_retries": 2, "fatal": true}}}}`, m, flaky("fa", &nA), flaky("fb", &nB))
	res, err := a.Run(context.Background(), map[string]any{"who": "x"})
	if nA.Load() != 2 || nB.Load() != 3 {
		t.Errorf("fa tried %d times (want 2), fb %d (want 3)", nA.Load(), nB.Load())
	}
	if !errors.Is(err, ErrTool) || res.Error == nil || res.Error.Code != CodeToolError || res.Error.Recoverable ||
		res.Iterations != 2 || !strings.Contains(res.Error.Message, "fb") || res.Error.Details["fatal"] != true {
		t.Errorf("a fatal tool's failure: %v, %+v", err, res.Error)
	}
	if _, err := New(mustSpec(t, `{`+base+`, "tools": ["add"], "retry": {"tools": {"nope": {"fatal": true}}}}`),
		WithProvider(&recorder{}, "test"), WithTools(testTools(t))); err == nil || !strings.Contains(err.Error(), "retry.tools.nope") {
		t.Errorf("a setting for an unknown tool: %v", err)
	}
}
