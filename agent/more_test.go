package agent

import (
	"context"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/agentry/agentry/event"
	"github.com/agentry/agentry/spec"
	"github.com/agentry/agentry/tool"
)

func TestToolRetriesOnlyForRetryableTools(t *testing.T) {
	for _, tt := range []struct {
		class tool.Idempotency
		calls int32
		ok    bool
	}{
		{tool.Safe, 3, true},
		{tool.Idempotent, 3, true},
		{tool.NonIdempotent, 1, false},
	} {
		t.Run(string(tt.class), func(t *testing.T) {
			var n atomic.Int32
			flaky := tool.Must(tool.Func("flaky", "", func(context.Context, echoArgs) (string, error) {
				if n.Add(1) < 3 {
					return "", tool.Transient(errors.New("blip"))
				}
				return "ok", nil
			}, tool.WithIdempotency(tt.class)))
			m := &recorder{replies: []reply{calls(call("1", "flaky", `{"text":""}`)), answer("done")}}
			a := newTestAgent(t, `{`+base+`, "tools": ["flaky"], "retry": {"tool_attempts": 3, "initial_backoff_ms": 1}}`, m, flaky)
			res, err := a.Run(context.Background(), map[string]any{"who": "x"})
			if err != nil {
				t.Fatal(err)
			}
			act := res.Steps[0].Action
			if n.Load() != tt.calls || (act.Error == "") != tt.ok || act.Attempts != int(tt.calls) {
				t.Errorf("%d calls, action %+v", n.Load(), act)
			}
		})
	}
}

func TestToolTimeoutPrecedence(t *testing.T) {
	waits := func(name string, own time.Duration) tool.Tool {
		opts := []tool.Option{}
		if own > 0 {
			opts = append(opts, tool.WithTimeout(own))
		}
		return tool.Must(tool.Func(name, "", func(ctx context.Context, _ echoArgs) (string, error) {
			<-ctx.Done()
			return "", ctx.Err()
		}, opts...))
	}
	a := newTestAgent(t, `{`+base+`, "tools": ["w1", "w2", "w3"], "limits": {"tool_timeout_ms": 30000, "tool_timeouts_ms": {"w1": 5}}}`,
		&recorder{}, waits("w1", time.Hour), waits("w2", 5*time.Millisecond), waits("w3", 0))
	if got := a.toolTimeout(a.tools.byName["w1"].info); got != 5*time.Millisecond {
		t.Errorf("the spec's per-tool timeout lost to the tool's own: %v", got)
	}
	if got := a.toolTimeout(a.tools.byName["w2"].info); got != 5*time.Millisecond {
		t.Errorf("the tool's own timeout lost to tool_timeout_ms: %v", got)
	}
	if got := a.toolTimeout(a.tools.byName["w3"].info); got != 30*time.Second {
		t.Errorf("tool_timeout_ms not used: %v", got)
	}
}

func TestAbortMidBatchPairsEvents(t *testing.T) {
	started := make(chan struct{}, 3)
	slow := tool.Must(tool.Func("hang", "", func(ctx context.Context, _ echoArgs) (string, error) {
		started <- struct{}{}
		<-ctx.Done()
		return "", ctx.Err()
	}))
	m := &recorder{replies: []reply{calls(call("1", "hang", `{"text":""}`), call("2", "hang", `{"text":""}`), call("3", "hang", `{"text":""}`))}}
	a := newTestAgent(t, `{`+base+`, "tools": ["hang"], "limits": {"max_parallel_tools": 2}}`, m, slow)
	var mu sync.Mutex
	open := map[string]int{}
	ends := 0
	sess, _ := a.NewSession(map[string]any{"who": "x"}, WithEvents(func(e event.Event) {
		mu.Lock()
		defer mu.Unlock()
		switch e.Type {
		case event.ToolCallStart:
			open[e.Tool.ID]++
		case event.ToolCallEnd:
			open[e.Tool.ID]--
			ends++
		}
	}))
	go func() {
		<-started
		<-started
		sess.Abort()
	}()
	res, err := sess.Run(context.Background())
	if !errors.Is(err, ErrAborted) {
		t.Fatalf("err = %v", err)
	}
	mu.Lock()
	defer mu.Unlock()
	for id, n := range open {
		if n != 0 {
			t.Errorf("call %s: starts and ends differ by %d", id, n)
		}
	}
	if ends != 3 || len(res.Steps) != 3 {
		t.Errorf("%d ends, %d steps; want every call recorded", ends, len(res.Steps))
	}
}

func TestSubAgentFailureIsAnObservation(t *testing.T) {
	a, err := FromDir("testdata/agents", "boss", WithTools(testTools(t)))
	if err != nil {
		t.Fatal(err)
	}
	// The boss calls the helper twice in one run: the helper's script has
	// only enough turns for the first; the second fails inside the tool.
	boss := &recorder{replies: []reply{
		calls(call("1", "helper", `{"word": "a"}`)),
		calls(call("2", "helper", `{"word": "b"}`)),
		answer("done"),
	}}
	s, _ := a.NewSession(nil, WithSessionProvider(boss))
	res, err := s.Run(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	second := res.Steps[1]
	if !strings.Contains(second.Observation, `"type":"agent_error"`) || !strings.Contains(second.Observation, "did not finish") {
		t.Errorf("observation %s", second.Observation)
	}
	if res.Metrics.ToolErrors != 1 {
		t.Errorf("tool errors %d", res.Metrics.ToolErrors)
	}
}

func TestNewReportsUnknownToolsAndModels(t *testing.T) {
	s := mustSpec(t, `{"agent_name": "a", "version": "v1", "model_name": "scripted:nowhere.json", "tools": ["add", "ad", "agent:ghost"],
		"limits": {"tool_timeouts_ms": {"sub": 5}}}`)
	_, err := New(s, WithTools(testTools(t)))
	if !errors.Is(err, spec.ErrInvalid) {
		t.Fatalf("err = %v", err)
	}
	for _, w := range []string{`unknown tool "ad" (known: add, boom, echo, slow)`, "nowhere.json", `tools[2] "agent:ghost": no registered agent and no agents directory`,
		"limits.tool_timeouts_ms.sub: the agent has no tool"} {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("err %q lacks %q", err, w)
		}
	}
}

func TestSubAgentCycle(t *testing.T) {
	_, err := FromDir("testdata/agents", "loopy", WithTools(testTools(t)))
	if err == nil || !strings.Contains(err.Error(), "sub-agent cycle: loopy -> loopy") {
		t.Errorf("err = %v", err)
	}
}
