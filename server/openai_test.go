package server

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"

	"github.com/agentry/agentry/agent"
	"github.com/agentry/agentry/policy"
	"github.com/agentry/agentry/spec"
)

// openAIClient is the official OpenAI Go client pointed at the server.
func openAIClient(f *fixture, key string) openai.Client {
	return openai.NewClient(option.WithBaseURL(f.http.URL+"/v1/"), option.WithAPIKey(key), option.WithMaxRetries(0))
}

// TestOpenAICompatible: the official OpenAI Go client calls agents as
// models: an agent that uses a tool and one that does not, streamed and
// not, with the usage filled in; the models list the agents; a model
// that is not served, and a key too weak, are OpenAI errors.
func TestOpenAICompatible(t *testing.T) {
	ctx := context.Background()
	keys := []Key{{Name: "rui", SHA256: HashKey("run-key"), Role: RoleRunner}, {Name: "rui", SHA256: HashKey("view-key"), Role: RoleViewer}}
	f := newFixture(t, Config{Keys: keys})
	client := openAIClient(f, "run-key")
	params := func(model string) openai.ChatCompletionNewParams {
		return openai.ChatCompletionNewParams{Model: model, Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("greet Ada")}}
	}
	t.Run("an agent with a tool", func(t *testing.T) {
		c, err := client.Chat.Completions.New(ctx, params("greeter"))
		if err != nil {
			t.Fatal(err)
		}
		if len(c.Choices) != 1 || c.Choices[0].Message.Content != "Hello, Ada." || c.Choices[0].FinishReason != "stop" || c.Model != "greeter" {
			t.Errorf("completion %+v", c)
		}
		if c.Usage.TotalTokens != c.Usage.PromptTokens+c.Usage.CompletionTokens {
			t.Errorf("usage %+v", c.Usage)
		}
		// It is an ordinary stored run.
		if code, run := f.do(t, "GET", "/v1/runs/"+c.ID[len("chatcmpl-"):], "view-key", ""); code != 200 || run["status"] != "completed" {
			t.Errorf("the stored run: %d %v", code, run)
		}
	})
	t.Run("usage", func(t *testing.T) {
		f.serveKeeper(t)
		// Its model reports 9 + 4 tokens a call, two calls a run.
		c, err := client.Chat.Completions.New(ctx, params("keeper"))
		if err != nil || c.Usage.PromptTokens != 18 || c.Usage.CompletionTokens != 8 || c.Usage.TotalTokens != 26 {
			t.Errorf("usage %+v, %v", c.Usage, err)
		}
		stream := client.Chat.Completions.NewStreaming(ctx, openai.ChatCompletionNewParams{Model: "keeper",
			Messages:      []openai.ChatCompletionMessageParamUnion{openai.UserMessage("store")},
			StreamOptions: openai.ChatCompletionStreamOptionsParam{IncludeUsage: openai.Bool(true)}})
		var usage openai.CompletionUsage
		for stream.Next() {
			if u := stream.Current().Usage; u.TotalTokens > 0 {
				usage = u
			}
		}
		if stream.Err() != nil || usage.PromptTokens != 18 || usage.TotalTokens != 26 {
			t.Errorf("streamed usage %+v, %v", usage, stream.Err())
		}
	})
	t.Run("an agent without tools, streamed", func(t *testing.T) {
		close(f.release) // the waiter answers
		stream := client.Chat.Completions.NewStreaming(ctx, openai.ChatCompletionNewParams{Model: "waiter@v1",
			Messages:      []openai.ChatCompletionMessageParamUnion{openai.UserMessage("wait")},
			StreamOptions: openai.ChatCompletionStreamOptionsParam{IncludeUsage: openai.Bool(true)}})
		acc := openai.ChatCompletionAccumulator{}
		chunks := 0
		for stream.Next() {
			acc.AddChunk(stream.Current())
			chunks++
		}
		if err := stream.Err(); err != nil {
			t.Fatal(err)
		}
		if len(acc.Choices) != 1 || acc.Choices[0].Message.Content != "released" || acc.Choices[0].FinishReason != "stop" || chunks < 3 {
			t.Errorf("%d chunks, accumulated %+v", chunks, acc.ChatCompletion)
		}
	})
	t.Run("streamed, with a tool", func(t *testing.T) {
		f2 := newFixture(t, Config{})
		c2 := openAIClient(f2, "")
		stream := c2.Chat.Completions.NewStreaming(ctx, params("greeter"))
		acc := openai.ChatCompletionAccumulator{}
		for stream.Next() {
			acc.AddChunk(stream.Current())
		}
		if err := stream.Err(); err != nil || len(acc.Choices) != 1 || acc.Choices[0].Message.Content != "Hello, Ada." {
			t.Errorf("%v %+v", err, acc.ChatCompletion)
		}
	})
	t.Run("models", func(t *testing.T) {
		viewer := openAIClient(f, "view-key")
		page, err := viewer.Models.List(ctx)
		if err != nil {
			t.Fatal(err)
		}
		ids := map[string]bool{}
		for _, m := range page.Data {
			ids[m.ID] = true
		}
		if !ids["greeter"] || !ids["greeter@v1"] || !ids["waiter@v1"] {
			t.Errorf("models %v", ids)
		}
	})
	t.Run("a run that waits for approval", func(t *testing.T) {
		ap, err := agent.New(&spec.Spec{AgentName: "careful", Version: "v1", SystemText: "Store.", Tools: []string{"kv_set"},
			Policy: &policy.Policy{Approval: policy.Approval{Tools: []string{"kv_set"}}}},
			agent.WithProvider(keeper{}, "test"), agent.WithTools(kvRegistry(t)))
		if err != nil {
			t.Fatal(err)
		}
		defer ap.Close()
		if err := f.srv.cfg.Agents.Register(ap); err != nil {
			t.Fatal(err)
		}
		_, err = client.Chat.Completions.New(ctx, params("careful"))
		var apiErr *openai.Error
		if !errors.As(err, &apiErr) || apiErr.StatusCode != 409 || apiErr.Code != "awaiting_approval" || !strings.Contains(apiErr.Message, "/resume") {
			t.Errorf("%v, want a 409 saying how to approve", err)
		}
	})
	for _, tc := range []struct {
		name, key, model string
		status           int
		code             string
	}{
		{"a model not served", "run-key", "nobody", 404, "model_not_found"},
		{"a viewer's key", "view-key", "greeter", 403, "forbidden"},
		{"no key", "", "greeter", 401, "unauthorized"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := openAIClient(f, tc.key)
			_, err := c.Chat.Completions.New(ctx, params(tc.model))
			var apiErr *openai.Error
			if !errors.As(err, &apiErr) || apiErr.StatusCode != tc.status || apiErr.Code != tc.code || apiErr.Message == "" {
				t.Errorf("%v, want an OpenAI error %d %s", err, tc.status, tc.code)
			}
		})
	}
}
