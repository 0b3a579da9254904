package llm_test

import (
	"context"
	"fmt"
	"time"

	"github.com/agentry/agentry/llm"
	"github.com/agentry/agentry/llm/scripted"
	"github.com/agentry/agentry/retry"
)

// cache is a provider middleware in a few lines: the same last message
// gets the same reply without a model call.
func cache(next llm.Provider) llm.Provider {
	seen := map[string]*llm.Response{}
	return llm.ProviderFunc(func(ctx context.Context, req *llm.Request) (*llm.Response, error) {
		key := req.Messages[len(req.Messages)-1].Content
		if r, ok := seen[key]; ok {
			return r, nil
		}
		r, err := next.Generate(ctx, req)
		if err == nil {
			seen[key] = r
		}
		return r, err
	})
}

func ExampleMiddleware() {
	script, _ := scripted.Parse("s", []byte(`{"turns": [{"content": "Paris"}]}`))
	p := llm.Chain(script.Model(), cache)
	for range 3 { // one model call; the script has a single turn
		resp, err := p.Generate(context.Background(), &llm.Request{Messages: []llm.Message{{Role: llm.RoleUser, Content: "Capital of France?"}}})
		fmt.Println(resp.Content, err)
	}
	// Output:
	// Paris <nil>
	// Paris <nil>
	// Paris <nil>
}

func ExampleRetry() {
	script, _ := scripted.Parse("s", []byte(`{"turns": [
		{"error": {"status": 429, "message": "slow down", "retry_after_ms": 1}},
		{"content": "done"}]}`))
	p := llm.Chain(script.Model(), llm.Retry(retry.Policy{Attempts: 3, InitialBackoff: time.Millisecond}))
	ctx := llm.WithTrace(context.Background(), &llm.TraceFuncs{OnRetry: func(i llm.RetryInfo) {
		fmt.Println("retry after attempt", i.Attempt, "waiting", i.Wait, "because", i.Err)
	}})
	resp, err := p.Generate(ctx, &llm.Request{Messages: []llm.Message{{Role: llm.RoleUser, Content: "hi"}}})
	fmt.Println(resp.Content, err)
	// Output:
	// retry after attempt 1 waiting 1ms because llm scripted: rate_limited (HTTP 429): slow down
	// done <nil>
}

func ExamplePricing_Cost() {
	cost, ok := llm.DefaultPricing().Cost("gpt-4.1-mini-2025-04-14", llm.Usage{PromptTokens: 1_000_000, CompletionTokens: 100_000})
	fmt.Printf("$%.2f %v\n", cost, ok)
	// Output: $0.56 true
}
