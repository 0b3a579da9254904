package llm

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/agentry/agentry/retry"
)

func TestKindForStatus(t *testing.T) {
	tests := []struct {
		status int
		want   Kind
	}{
		{429, KindRateLimited}, {401, KindAuth}, {403, KindAuth}, {404, KindNotFound},
		{413, KindContextTooLong}, {503, KindOverloaded}, {529, KindOverloaded},
		{500, KindTransient}, {502, KindTransient}, {408, KindTransient},
		{400, KindInvalidRequest}, {422, KindInvalidRequest}, {200, KindUnknown},
	}
	for _, tt := range tests {
		if got := KindForStatus(tt.status); got != tt.want {
			t.Errorf("KindForStatus(%d) = %v, want %v", tt.status, got, tt.want)
		}
	}
}

func TestAPIErrorIsAndAs(t *testing.T) {
	base := &APIError{Kind: KindRateLimited, Provider: "openai", Model: "gpt-4.1", Status: 429, Message: "slow down", RetryAfter: time.Second}
	err := fmt.Errorf("calling: %w", base)
	if !errors.Is(err, ErrRateLimited) {
		t.Error("errors.Is(err, ErrRateLimited) = false")
	}
	if errors.Is(err, ErrAuth) {
		t.Error("errors.Is(err, ErrAuth) = true for a rate limit")
	}
	var ae *APIError
	if !errors.As(err, &ae) || ae.Status != 429 {
		t.Fatalf("errors.As failed: %v", ae)
	}
	if got := RetryAfterOf(err); got != time.Second {
		t.Errorf("RetryAfterOf = %v", got)
	}
	msg := base.Error()
	for _, want := range []string{"openai", "gpt-4.1", "rate_limited", "HTTP 429", "slow down"} {
		if !strings.Contains(msg, want) {
			t.Errorf("message %q lacks %q", msg, want)
		}
	}
	for k := KindUnknown; k <= KindContentFiltered; k++ {
		if back, ok := ParseKind(k.String()); !ok || back != k {
			t.Errorf("ParseKind(%q) = %v, %v", k.String(), back, ok)
		}
	}
}

// flaky fails with the given errors, then answers.
type flaky struct {
	errs  []error
	calls atomic.Int32
}

func (f *flaky) Generate(ctx context.Context, req *Request) (*Response, error) {
	n := int(f.calls.Add(1))
	if n <= len(f.errs) {
		return nil, f.errs[n-1]
	}
	return &Response{Content: "ok"}, nil
}

func TestRetry(t *testing.T) {
	rate := &APIError{Kind: KindRateLimited, RetryAfter: time.Millisecond}
	bad := &APIError{Kind: KindInvalidRequest}
	tests := []struct {
		name      string
		errs      []error
		attempts  int
		wantCalls int32
		wantErr   error
		wantTrace int
	}{
		{"succeeds first", nil, 3, 1, nil, 0},
		{"retries rate limit", []error{rate, rate}, 3, 3, nil, 2},
		{"gives up after attempts", []error{rate, rate, rate}, 3, 3, ErrRateLimited, 2},
		{"no retry of invalid request", []error{bad}, 3, 1, ErrInvalidRequest, 0},
		{"transient retried", []error{&APIError{Kind: KindTransient}}, 2, 2, nil, 1},
		{"unknown errors are not retried", []error{errors.New("boom")}, 3, 1, nil, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := &flaky{errs: tt.errs}
			p := Retry(retry.Policy{Attempts: tt.attempts, InitialBackoff: time.Millisecond, MaxBackoff: 2 * time.Millisecond, Jitter: 0.5})(f)
			var retries []RetryInfo
			ctx := WithTrace(context.Background(), &TraceFuncs{OnRetry: func(i RetryInfo) { retries = append(retries, i) }})
			_, err := p.Generate(ctx, &Request{})
			if got := f.calls.Load(); got != tt.wantCalls {
				t.Errorf("calls = %d, want %d", got, tt.wantCalls)
			}
			if tt.wantErr != nil && !errors.Is(err, tt.wantErr) {
				t.Errorf("err = %v, want %v", err, tt.wantErr)
			}
			if tt.wantErr == nil && tt.name != "unknown errors are not retried" && err != nil {
				t.Errorf("err = %v", err)
			}
			if len(retries) != tt.wantTrace {
				t.Errorf("trace saw %d retries, want %d", len(retries), tt.wantTrace)
			}
			for i, r := range retries {
				if r.Attempt != i+1 {
					t.Errorf("retry %d reports attempt %d", i, r.Attempt)
				}
			}
		})
	}
}

func TestRetryHonoursRetryAfterAndDeadline(t *testing.T) {
	f := &flaky{errs: []error{&APIError{Kind: KindRateLimited, RetryAfter: time.Hour}}}
	p := Retry(retry.Policy{Attempts: 3, InitialBackoff: time.Millisecond})(f)
	var waits []time.Duration
	ctx := WithTrace(context.Background(), &TraceFuncs{OnRetry: func(i RetryInfo) { waits = append(waits, i.Wait) }})
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	_, err := p.Generate(ctx, &Request{})
	if !errors.Is(err, ErrRateLimited) {
		t.Fatalf("err = %v, want the rate limit at once (the Retry-After passes the deadline)", err)
	}
	if f.calls.Load() != 1 || len(waits) != 0 {
		t.Errorf("calls = %d, waits = %v", f.calls.Load(), waits)
	}

	f = &flaky{errs: []error{&APIError{Kind: KindRateLimited, RetryAfter: 3 * time.Millisecond}}}
	p = Retry(retry.Policy{Attempts: 2, InitialBackoff: time.Hour})(f)
	ctx = WithTrace(context.Background(), &TraceFuncs{OnRetry: func(i RetryInfo) { waits = append(waits, i.Wait) }})
	if _, err := p.Generate(ctx, &Request{}); err != nil {
		t.Fatal(err)
	}
	if len(waits) != 1 || waits[0] != 3*time.Millisecond {
		t.Errorf("waits = %v, want the Retry-After of 3ms", waits)
	}
}

func TestAttemptTimeoutIsTransient(t *testing.T) {
	var calls atomic.Int32
	slow := providerFunc(func(ctx context.Context, _ *Request) (*Response, error) {
		if calls.Add(1) == 1 {
			<-ctx.Done()
			return nil, ctx.Err()
		}
		return &Response{Content: "second"}, nil
	})
	p := Chain(slow, Retry(retry.Policy{Attempts: 2}), Timeout(5*time.Millisecond))
	resp, err := p.Generate(context.Background(), &Request{Model: "m"})
	if err != nil || resp.Content != "second" {
		t.Fatalf("resp %v err %v", resp, err)
	}
}

func TestCallerCancelIsNotRetried(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	var calls atomic.Int32
	p := Retry(retry.Policy{Attempts: 5})(providerFunc(func(ctx context.Context, _ *Request) (*Response, error) {
		calls.Add(1)
		cancel()
		return nil, &APIError{Kind: KindTransient}
	}))
	if _, err := p.Generate(ctx, &Request{}); err == nil {
		t.Fatal("want an error")
	}
	if calls.Load() != 1 {
		t.Errorf("calls = %d after the caller cancelled", calls.Load())
	}
}

type providerFunc func(context.Context, *Request) (*Response, error)

func (f providerFunc) Generate(ctx context.Context, r *Request) (*Response, error) { return f(ctx, r) }

// chunky streams a fixed list, failing where told.
type chunky struct {
	providerFunc
	runs  [][]Chunk
	fails []bool
	n     int
}

func (c *chunky) Stream(ctx context.Context, _ *Request) iter.Seq2[Chunk, error] {
	i := c.n
	c.n++
	return func(yield func(Chunk, error) bool) {
		for _, ch := range c.runs[i] {
			if !yield(ch, nil) {
				return
			}
		}
		if c.fails[i] {
			yield(Chunk{}, &APIError{Kind: KindTransient, Message: "stream broke"})
		}
	}
}

func TestStreamRetryOnlyBeforeFirstChunk(t *testing.T) {
	c := &chunky{runs: [][]Chunk{nil, {{Text: "hel"}, {Text: "lo"}}}, fails: []bool{true, false}}
	p := Retry(retry.Policy{Attempts: 3})(c).(Streamer)
	resp, err := Collect(p.Stream(context.Background(), &Request{}), nil)
	if err != nil || resp.Content != "hello" {
		t.Fatalf("got %q, %v", resp.Content, err)
	}
	c = &chunky{runs: [][]Chunk{{{Text: "par"}}, {{Text: "never"}}}, fails: []bool{true, false}}
	p = Retry(retry.Policy{Attempts: 3})(c).(Streamer)
	resp, err = Collect(p.Stream(context.Background(), &Request{}), nil)
	if !errors.Is(err, ErrTransient) {
		t.Fatalf("err = %v, want the broken stream", err)
	}
	if resp.Content != "par" || c.n != 1 {
		t.Errorf("content %q after %d streams; want the partial text kept and no retry", resp.Content, c.n)
	}
}

func TestCollectAssemblesToolCalls(t *testing.T) {
	u := Usage{PromptTokens: 3, CompletionTokens: 4, TotalTokens: 7}
	chunks := []Chunk{
		{Text: "Let me "},
		{ToolCall: &ToolCallDelta{Index: 0, ID: "a", Name: "add", Arguments: `{"a":`}},
		{Text: "add.", ToolCall: &ToolCallDelta{Index: 1, ID: "b", Name: "mul"}},
		{ToolCall: &ToolCallDelta{Index: 0, Arguments: `1}`}},
		{Usage: &u, FinishReason: "tool_calls", Model: "m"},
	}
	seq := func(yield func(Chunk, error) bool) {
		for _, c := range chunks {
			if !yield(c, nil) {
				return
			}
		}
	}
	var seen int
	resp, err := Collect(seq, func(Chunk) { seen++ })
	if err != nil {
		t.Fatal(err)
	}
	if resp.Content != "Let me add." || len(resp.ToolCalls) != 2 || seen != len(chunks) {
		t.Fatalf("resp %+v seen %d", resp, seen)
	}
	if string(resp.ToolCalls[0].Arguments) != `{"a":1}` || string(resp.ToolCalls[1].Arguments) != `{}` {
		t.Errorf("arguments %s / %s", resp.ToolCalls[0].Arguments, resp.ToolCalls[1].Arguments)
	}
	if resp.Usage != u || resp.FinishReason != "tool_calls" || resp.Model != "m" {
		t.Errorf("usage %+v finish %q model %q", resp.Usage, resp.FinishReason, resp.Model)
	}
}

func TestPricingLookup(t *testing.T) {
	p := DefaultPricing()
	tests := []struct {
		model string
		want  Price
		ok    bool
	}{
		{"gpt-4.1-mini", Price{0.40, 1.60, 0.10}, true},
		{"gpt-4.1-mini-2025-04-14", Price{0.40, 1.60, 0.10}, true},
		{"gpt-4.1-2025-04-14", Price{2.00, 8.00, 0.50}, true},
		{"openai:gpt-4.1-mini", Price{0.40, 1.60, 0.10}, true},
		{"ft:gpt-4.1-mini-2025-04-14:personal:a2-promptshaper-v1:XXXX", Price{0.80, 3.20, 0.20}, true},
		{"claude-sonnet-4-5-20250929", Price{3, 15, 0.30}, true},
		{"no-such-model", Price{}, false},
	}
	for _, tt := range tests {
		got, ok := p.Lookup(tt.model)
		if got != tt.want || ok != tt.ok {
			t.Errorf("Lookup(%q) = %+v, %v; want %+v, %v", tt.model, got, ok, tt.want, tt.ok)
		}
	}
}

// TestInCatalog: the catalog knows a priced model and its dated or
// -latest releases, but not a misspelt id that Lookup would still price
// by its beginning.
func TestInCatalog(t *testing.T) {
	tests := []struct {
		model string
		want  bool
	}{
		{"gpt-4.1-mini", true},
		{"gpt-4.1-mini-2025-04-14", true},
		{"claude-sonnet-4-5-20250929", true},
		{"claude-haiku-4-5-latest", true},
		{"gpt-4.1-mini-turbo", false},
		{"gpt-4.1-minii", false},
		{"no-such-model", false},
		{"", false},
	}
	for _, tt := range tests {
		t.Run(tt.model, func(t *testing.T) {
			if got := InCatalog(tt.model); got != tt.want {
				t.Errorf("InCatalog(%q) = %v, want %v", tt.model, got, tt.want)
			}
		})
	}
	if _, priced := DefaultPricing().Lookup("gpt-4.1-mini-turbo"); !priced {
		t.Error("Lookup no longer prices an id by its beginning: the catalog check is not stricter")
	}
}

func TestPriceCost(t *testing.T) {
	pr := Price{Prompt: 2, Completion: 8, CachedPrompt: 0.5}
	got := pr.Cost(Usage{PromptTokens: 1_000_000, CompletionTokens: 500_000, CachedPromptTokens: 400_000})
	want := 0.6*2 + 0.4*0.5 + 0.5*8
	if diff := got - want; diff > 1e-9 || diff < -1e-9 {
		t.Errorf("cost = %v, want %v", got, want)
	}
	if c, ok := DefaultPricing().Cost("gpt-4.1-mini", Usage{PromptTokens: 1000, CompletionTokens: 1000}); !ok || c < 0.00199 || c > 0.00201 {
		t.Errorf("gpt-4.1-mini 1k/1k = %v, %v; want $0.002", c, ok)
	}
}

func TestPricingFiles(t *testing.T) {
	dir := t.TempDir()
	good := filepath.Join(dir, "p.json")
	os.WriteFile(good, []byte(`{"models": {"my-model": {"prompt": 1, "completion": 2}, "gpt-4.1-mini": {"prompt": 9, "completion": 9}}}`), 0o600)
	p, err := LoadPricingFile(good)
	if err != nil {
		t.Fatal(err)
	}
	if pr, _ := p.Lookup("my-model"); pr.Completion != 2 {
		t.Errorf("override not added: %+v", pr)
	}
	if pr, _ := p.Lookup("gpt-4.1-mini"); pr.Prompt != 9 {
		t.Errorf("override did not replace: %+v", pr)
	}
	if pr, _ := DefaultPricing().Lookup("gpt-4.1-mini"); pr.Prompt != 0.40 {
		t.Errorf("override changed the default table: %+v", pr)
	}
	bad := []struct{ body, want string }{
		{`{"models": {"x": {"prompt": -1, "completion": 1}}}`, "negative"},
		{`{"models": {"x": {"prompt": 1, "completoin": 1}}}`, "completoin"},
		{`{"currency": "EUR", "models": {}}`, "EUR"},
		{`{"models": `, "unexpected EOF"},
	}
	for _, b := range bad {
		if _, err := ParsePricing([]byte(b.body)); err == nil || !strings.Contains(err.Error(), b.want) {
			t.Errorf("ParsePricing(%s) = %v, want an error mentioning %q", b.body, err, b.want)
		}
	}
}

// fakeDrivers registers drivers with the prefixes the provider packages
// claim (they cannot be imported here).
var fakeDrivers = sync.OnceFunc(func() {
	open := func(string, Config) (Provider, error) { return nil, errors.New("fake") }
	Register("openai", Driver{Open: open, Prefixes: []string{"gpt-", "ft:", "chatgpt-", "o1", "o3", "o4"}})
	Register("gemini", Driver{Open: open, Prefixes: []string{"gemini"},
		ContextWindow: func(string) int { return 7 }})
	Register("fake", Driver{Open: func(string, Config) (Provider, error) {
		return ProviderFunc(func(context.Context, *Request) (*Response, error) { return &Response{}, nil }), nil
	}})
})

func TestParseModel(t *testing.T) {
	fakeDrivers()
	tests := []struct{ in, provider, model string }{
		{"gpt-4.1-mini", "openai", "gpt-4.1-mini"},
		{"ft:gpt-4.1-mini:org:x:1", "openai", "ft:gpt-4.1-mini:org:x:1"},
		{"o3", "openai", "o3"},
		{"claude-sonnet-4-5", "", "claude-sonnet-4-5"}, // anthropic is not registered here
		{"anthropic:claude-sonnet-4-5", "anthropic", "claude-sonnet-4-5"},
		{"gemini-2.5-flash", "gemini", "gemini-2.5-flash"},
		{"ollama:qwen3", "ollama", "qwen3"},
		{"Weird:thing", "", "Weird:thing"},
		{"scripted:turns.json", "scripted", "turns.json"},
		{"mystery", "", "mystery"},
	}
	for _, tt := range tests {
		p, m := ParseModel(tt.in)
		if p != tt.provider || m != tt.model {
			t.Errorf("ParseModel(%q) = %q, %q; want %q, %q", tt.in, p, m, tt.provider, tt.model)
		}
	}
	if _, err := Open("mystery", Config{}); !errors.Is(err, ErrUnknownProvider) {
		t.Errorf("Open(mystery) = %v", err)
	}
	if _, err := Open("anthropic:claude-x", Config{}); !errors.Is(err, ErrUnknownProvider) || !strings.Contains(err.Error(), `provider "anthropic"`) {
		t.Errorf("Open of an unregistered provider = %v", err)
	}
	m, err := Open("fake:x.json", Config{})
	if err != nil || m.ProviderName != "fake" || m.ID != "x.json" || m.Provider == nil ||
		m.Capabilities != (Capabilities{Tools: true, StructuredOutput: true, Streaming: true}) {
		t.Errorf("Open(fake:x.json) = %+v, %v", m, err)
	}
	if _, err := Open("gemini-2.5-flash", Config{}); err == nil || err.Error() != "fake" {
		t.Errorf("a driver's error: %v", err)
	}
	defer func() {
		if recover() == nil {
			t.Error("registering a provider twice did not panic")
		}
	}()
	Register("fake", Driver{Open: func(string, Config) (Provider, error) { return nil, nil }})
}

func TestUsageAdd(t *testing.T) {
	var u Usage
	u.Add(Usage{PromptTokens: 2, CompletionTokens: 3})
	u.Add(Usage{PromptTokens: 1, CompletionTokens: 1, TotalTokens: 5, CachedPromptTokens: 1})
	if u != (Usage{PromptTokens: 3, CompletionTokens: 4, TotalTokens: 10, CachedPromptTokens: 1}) {
		t.Errorf("usage = %+v", u)
	}
}
