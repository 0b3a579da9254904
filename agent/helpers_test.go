package agent

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"sync"
	"testing"

	"go.uber.org/goleak"

	"github.com/agentry/agentry/llm"
	"github.com/agentry/agentry/llm/scripted"
	"github.com/agentry/agentry/spec"
	"github.com/agentry/agentry/tool"
)

func TestMain(m *testing.M) {
	if os.Getenv(crashEnv) != "" {
		os.Exit(crashHelper())
	}
	goleak.VerifyTestMain(m)
}

type addArgs struct {
	A int `json:"a"`
	B int `json:"b"`
}

type echoArgs struct {
	Text string `json:"text"`
}

func testTools(t testing.TB, extra ...tool.Tool) *tool.Registry {
	t.Helper()
	add := tool.Must(tool.Func("add", "Add two integers.", func(_ context.Context, in addArgs) (int, error) {
		return in.A + in.B, nil
	}, tool.WithIdempotency(tool.Safe)))
	echo := tool.Must(tool.Func("echo", "Echo text.", func(_ context.Context, in echoArgs) (string, error) {
		return in.Text, nil
	}, tool.WithIdempotency(tool.Safe)))
	slow := tool.Must(tool.Func("slow", "Wait until cancelled.", func(ctx context.Context, _ echoArgs) (string, error) {
		<-ctx.Done()
		return "", ctx.Err()
	}, tool.WithIdempotency(tool.Safe)))
	boom := tool.Must(tool.Func("boom", "Panic.", func(context.Context, echoArgs) (string, error) {
		panic("kaboom")
	}))
	r, err := tool.NewRegistry(append([]tool.Tool{add, echo, slow, boom}, extra...)...)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// recorder is a model that plays replies in order and records requests.
type recorder struct {
	mu      sync.Mutex
	replies []reply
	reqs    []llm.Request
}

type reply struct {
	resp *llm.Response
	err  error
	wait bool // block until the context ends
}

func (r *recorder) Generate(ctx context.Context, req *llm.Request) (*llm.Response, error) {
	r.mu.Lock()
	n := len(r.reqs)
	cp := *req
	cp.Messages = append([]llm.Message(nil), req.Messages...)
	r.reqs = append(r.reqs, cp)
	r.mu.Unlock()
	if n >= len(r.replies) {
		return nil, errors.New("recorder: no more replies")
	}
	rp := r.replies[n]
	if rp.wait {
		<-ctx.Done()
		return nil, ctx.Err()
	}
	return rp.resp, rp.err
}

func calls(cs ...llm.ToolCall) reply {
	return reply{resp: &llm.Response{ToolCalls: cs, Usage: llm.Usage{PromptTokens: 10, CompletionTokens: 5, TotalTokens: 15}}}
}

func call(id, name, args string) llm.ToolCall {
	return llm.ToolCall{ID: id, Name: name, Arguments: json.RawMessage(args)}
}

func answer(text string) reply {
	return reply{resp: &llm.Response{Content: text, Usage: llm.Usage{PromptTokens: 10, CompletionTokens: 5, TotalTokens: 15}}}
}

func mustSpec(t testing.TB, js string) *spec.Spec {
	t.Helper()
	s, err := spec.Parse("test", []byte(js))
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func newTestAgent(t testing.TB, spec string, model llm.Provider, extra ...tool.Tool) *Agent {
	t.Helper()
	a, err := New(mustSpec(t, spec), WithProvider(model, "test"), WithTools(testTools(t, extra...)))
	if err != nil {
		t.Fatal(err)
	}
	return a
}

func scriptModel(t testing.TB, js string) *scripted.Model {
	t.Helper()
	s, err := scripted.Parse("test", []byte(js))
	if err != nil {
		t.Fatal(err)
	}
	return s.Model()
}
