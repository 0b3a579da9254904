package llm

import (
	"context"
	"encoding/json"
	"errors"
	"iter"
	"reflect"
	"strings"
	"testing"
	"time"
)

// fixed answers with one reply or one error, and counts its calls.
type fixed struct {
	name  string
	err   error
	calls int
	chunk bool // stream: yield a chunk before failing
}

func (f *fixed) Generate(_ context.Context, req *Request) (*Response, error) {
	f.calls++
	if f.err != nil {
		return nil, f.err
	}
	return &Response{Content: f.name + " answered " + req.Model}, nil
}

func (f *fixed) Stream(ctx context.Context, req *Request) iter.Seq2[Chunk, error] {
	return func(yield func(Chunk, error) bool) {
		f.calls++
		if f.chunk && !yield(Chunk{Text: f.name + " started "}, nil) {
			return
		}
		if f.err != nil {
			yield(Chunk{}, f.err)
			return
		}
		yield(Chunk{Text: f.name + " streamed"}, nil)
	}
}

func cand(f *fixed, model string, caps Capabilities) Candidate {
	return Candidate{Provider: f, Name: f.name, Model: model, Caps: caps}
}

var all = Capabilities{Tools: true, StructuredOutput: true, Streaming: true}

func TestRouterFallsOver(t *testing.T) {
	a := &fixed{name: "a", err: &APIError{Kind: KindOverloaded, Message: "busy"}}
	b := &fixed{name: "b"}
	var seen []FallbackInfo
	ctx := WithTrace(context.Background(), &TraceFuncs{OnFallback: func(i FallbackInfo) { seen = append(seen, i) }})
	r := NewRouter([]Candidate{cand(a, "m1", all), cand(b, "m2", all)}, RouterOptions{})
	resp, err := r.Generate(ctx, &Request{Model: "ignored"})
	if err != nil || resp.Content != "b answered m2" || resp.Provider != "b" || resp.Model != "m2" {
		t.Fatalf("%+v %v", resp, err)
	}
	if len(seen) != 1 || seen[0].FromModel != "m1" || seen[0].ToModel != "m2" || !errors.Is(seen[0].Err, ErrOverloaded) {
		t.Errorf("fallbacks %+v", seen)
	}
	// A request error is not a reason to try another model.
	a.err, a.calls, b.calls = &APIError{Kind: KindInvalidRequest, Message: "bad"}, 0, 0
	if _, err := r.Generate(ctx, &Request{}); !errors.Is(err, ErrInvalidRequest) || b.calls != 0 {
		t.Errorf("err %v, b called %d times", err, b.calls)
	}
	// All unavailable: the last error.
	a.err, b.err = &APIError{Kind: KindRateLimited}, &APIError{Kind: KindTransient, Message: "down"}
	if _, err := r.Generate(ctx, &Request{}); !errors.Is(err, ErrTransient) {
		t.Errorf("err %v", err)
	}
}

func TestRouterCapabilities(t *testing.T) {
	noTools := &fixed{name: "plain"}
	small := &fixed{name: "small"}
	pricey := &fixed{name: "pricey"}
	ok := &fixed{name: "ok"}
	cands := []Candidate{
		cand(noTools, "p", Capabilities{Streaming: true}),
		cand(small, "s", Capabilities{Tools: true, ContextWindow: 10}),
		{Provider: pricey, Name: "pricey", Model: "x", Caps: all, Price: Price{Prompt: 15, Completion: 75}},
		cand(ok, "o", all),
	}
	r := NewRouter(cands, RouterOptions{MaxCompletionPrice: 20})
	req := &Request{Tools: []ToolSpec{{Name: "t"}}, Messages: []Message{{Role: RoleUser, Content: strings.Repeat("word ", 40)}}}
	resp, err := r.Generate(context.Background(), req)
	if err != nil || resp.Provider != "ok" || noTools.calls+small.calls+pricey.calls != 0 {
		t.Fatalf("%+v %v", resp, err)
	}
	r = NewRouter(cands[:3], RouterOptions{MaxCompletionPrice: 20})
	_, err = r.Generate(context.Background(), req)
	if !errors.Is(err, ErrNoCandidate) {
		t.Fatalf("err %v", err)
	}
	for _, want := range []string{"plain:p: no tool calling", "small:s: context window of 10 tokens is too small", "pricey:x: above the completion price ceiling"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("err %q lacks %q", err, want)
		}
	}
}

func TestRouterStrategy(t *testing.T) {
	a, b := &fixed{name: "a"}, &fixed{name: "b"}
	cheapest := func(_ *Request, _ Needs, cs []Candidate) []Candidate {
		if cs[1].Price.Completion < cs[0].Price.Completion {
			cs[0], cs[1] = cs[1], cs[0]
		}
		return cs
	}
	r := NewRouter([]Candidate{{Provider: a, Name: "a", Model: "a1", Caps: all, Price: Price{Completion: 10}},
		{Provider: b, Name: "b", Model: "b1", Caps: all, Price: Price{Completion: 1}}}, RouterOptions{Strategy: cheapest})
	resp, err := r.Generate(context.Background(), &Request{})
	if err != nil || resp.Provider != "b" {
		t.Errorf("%+v %v", resp, err)
	}
}

// TestBuiltInStrategies: Cheapest orders by price for the request's
// size, unpriced models last; Fastest by the latency the router measured,
// one not measured yet first; a price ceiling leaves out the dearer and
// the unpriced models.
func TestBuiltInStrategies(t *testing.T) {
	a, b, c := &fixed{name: "a"}, &fixed{name: "b"}, &fixed{name: "c"}
	cands := []Candidate{
		{Provider: a, Name: "a", Model: "a1", Caps: all, Price: Price{Prompt: 2, Completion: 8}},
		{Provider: b, Name: "b", Model: "b1", Caps: all, Unpriced: true},
		{Provider: c, Name: "c", Model: "c1", Caps: all, Price: Price{Prompt: 0.4, Completion: 1.6}},
	}
	names := func(cs []Candidate) string {
		var out []string
		for _, c := range cs {
			out = append(out, c.Name)
		}
		return strings.Join(out, ",")
	}
	for _, tc := range []struct {
		name    string
		opts    RouterOptions
		measure map[int]time.Duration // latency observed, by candidate
		want    string                // the order planned
	}{
		{"priority", RouterOptions{}, nil, "a,b,c"},
		{"cheapest", RouterOptions{Strategy: Cheapest}, nil, "c,a,b"},
		{"fastest, b not measured", RouterOptions{Strategy: Fastest}, map[int]time.Duration{0: 900 * time.Millisecond, 2: 300 * time.Millisecond}, "b,c,a"},
		{"fastest, all measured", RouterOptions{Strategy: Fastest}, map[int]time.Duration{0: 100 * time.Millisecond, 1: 500 * time.Millisecond, 2: 300 * time.Millisecond}, "a,c,b"},
		{"a completion price ceiling", RouterOptions{MaxCompletionPrice: 2}, nil, "c"},
		{"a ceiling with cheapest", RouterOptions{Strategy: Cheapest, MaxPromptPrice: 5}, nil, "c,a"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := NewRouter(cands, tc.opts)
			for i, d := range tc.measure {
				r.measured(r.cands[i], d)
			}
			order, err := r.plan(&Request{}, false)
			if err != nil || names(order) != tc.want {
				t.Errorf("order %s, %v; want %s", names(order), err, tc.want)
			}
		})
	}
	// What the router measures is a moving average of its answers.
	r := NewRouter(cands, RouterOptions{Strategy: Fastest})
	r.measured(r.cands[0], 100*time.Millisecond)
	r.measured(r.cands[0], 600*time.Millisecond)
	if got := r.latency[0]; got != 200*time.Millisecond {
		t.Errorf("latency after 100ms and 600ms: %v, want 200ms", got)
	}
	if _, err := r.Generate(context.Background(), &Request{}); err != nil || r.latency[1] == 0 {
		t.Errorf("the unmeasured candidate answered first and was measured: %v, %v", err, r.latency)
	}
}

func TestRouterStream(t *testing.T) {
	a := &fixed{name: "a", err: &APIError{Kind: KindOverloaded}}
	b := &fixed{name: "b"}
	r := NewRouter([]Candidate{cand(a, "m1", all), cand(b, "m2", all)}, RouterOptions{})
	resp, err := Collect(r.Stream(context.Background(), &Request{}), nil)
	if err != nil || resp.Content != "b streamed" {
		t.Fatalf("%+v %v", resp, err)
	}
	// Once a chunk has reached the caller, a failure is final.
	a.chunk, a.calls, b.calls = true, 0, 0
	resp, err = Collect(r.Stream(context.Background(), &Request{}), nil)
	if !errors.Is(err, ErrOverloaded) || b.calls != 0 || resp.Content != "a started " {
		t.Errorf("%+v %v (b called %d times)", resp, err, b.calls)
	}
	// A candidate that cannot stream is asked for a whole reply.
	c := Candidate{Provider: providerFunc(func(context.Context, *Request) (*Response, error) {
		return &Response{Content: "whole", Usage: Usage{TotalTokens: 3}}, nil
	}), Name: "c", Model: "c1", Caps: all}
	resp, err = Collect(NewRouter([]Candidate{c}, RouterOptions{}).Stream(context.Background(), &Request{}), nil)
	if err != nil || resp.Content != "whole" || resp.Usage.TotalTokens != 3 || resp.Model != "c1" {
		t.Errorf("%+v %v", resp, err)
	}
}

// TestRouterVision: a request with images skips a model that takes none;
// the Message stays its size: images cost nothing to messages without.
func TestRouterVision(t *testing.T) {
	blind, sees := &fixed{name: "blind"}, &fixed{name: "sees"}
	vision := all
	vision.Vision = true
	r := NewRouter([]Candidate{cand(blind, "b", all), cand(sees, "s", vision)}, RouterOptions{})
	req := &Request{Messages: []Message{{Role: RoleUser, Content: "What is this?", Media: &Media{Images: []Image{{URL: "https://x.dev/a.png"}}}}}}
	resp, err := r.Generate(context.Background(), req)
	if err != nil || resp.Provider != "sees" || blind.calls != 0 {
		t.Fatalf("%+v %v (blind called %d times)", resp, err, blind.calls)
	}
	resp, err = r.Generate(context.Background(), &Request{Messages: []Message{{Role: RoleUser, Content: "hi"}}})
	if err != nil || resp.Provider != "blind" {
		t.Errorf("a request without images: %+v %v", resp, err)
	}
	if n := reflect.TypeOf(Message{}).Size(); n > 88 {
		t.Errorf("a Message is %d bytes; a transcript holds many: keep it at 88", n)
	}
}

// TestRouterUnknown: a model of unknown capabilities is tried for tools,
// a schema and streaming, as a window of 0 is not checked, but gets no
// images; one known to lack a capability is passed over.
func TestRouterUnknown(t *testing.T) {
	image := []Message{{Role: RoleUser, Content: "What is this?", Media: &Media{Images: []Image{{URL: "https://x.dev/a.png"}}}}}
	tests := []struct {
		name   string
		caps   Capabilities
		req    Request
		stream bool
		ok     bool
		reason string
	}{
		{"unknown, a stream", Capabilities{Unknown: true}, Request{}, true, true, ""},
		{"known without streaming", Capabilities{Tools: true}, Request{}, true, false, "no streaming"},
		{"unknown, tools", Capabilities{Unknown: true}, Request{Tools: []ToolSpec{{Name: "t"}}}, false, true, ""},
		{"unknown, a schema", Capabilities{Unknown: true}, Request{ResponseSchema: json.RawMessage(`{}`)}, false, true, ""},
		{"unknown, a long prompt", Capabilities{Unknown: true}, Request{Messages: []Message{{Role: RoleUser, Content: strings.Repeat("word ", 1e4)}}}, false, true, ""},
		{"unknown, images", Capabilities{Unknown: true}, Request{Messages: image}, false, false, "image input unknown"},
		{"known without tools", Capabilities{Streaming: true}, Request{Tools: []ToolSpec{{Name: "t"}}}, false, false, "no tool calling"},
		{"known without a schema", Capabilities{Tools: true}, Request{ResponseSchema: json.RawMessage(`{}`)}, false, false, "no structured output"},
		{"known without images", all, Request{Messages: image}, false, false, "no image input"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := Candidate{Name: "x", Model: "m", Caps: tt.caps}
			ok, reason := c.Supports(NeedsOf(&tt.req, tt.stream))
			if ok != tt.ok || reason != tt.reason {
				t.Errorf("Supports = %v, %q; want %v, %q", ok, reason, tt.ok, tt.reason)
			}
		})
	}
}

// TestRoleJSON: a role is its name in JSON, and an unknown name is refused.
func TestRoleJSON(t *testing.T) {
	b, _ := json.Marshal(Message{Role: RoleAssistant, Content: "x"})
	if !strings.Contains(string(b), `"role":"assistant"`) {
		t.Errorf("%s", b)
	}
	var m Message
	if err := json.Unmarshal([]byte(`{"role": "tool", "content": "y"}`), &m); err != nil || m.Role != RoleTool {
		t.Errorf("%v %+v", err, m)
	}
	if err := json.Unmarshal([]byte(`{"role": "wizard"}`), &m); err == nil || !strings.Contains(err.Error(), "wizard") {
		t.Errorf("an unknown role: %v", err)
	}
}
