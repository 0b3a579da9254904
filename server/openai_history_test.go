package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/responses"
	"github.com/openai/openai-go/v3/shared"

	"github.com/agentry/agentry/agent"
	"github.com/agentry/agentry/internal/testdb"
	"github.com/agentry/agentry/llm"
	"github.com/agentry/agentry/spec"
)

// listener is a model that answers from the name a user gave earlier in
// what it is sent, and keeps each request.
type listener struct {
	mu   sync.Mutex
	reqs []llm.Request
}

func (m *listener) Generate(_ context.Context, req *llm.Request) (*llm.Response, error) {
	m.mu.Lock()
	m.reqs = append(m.reqs, llm.Request{Messages: append([]llm.Message(nil), req.Messages...)})
	m.mu.Unlock()
	for _, msg := range req.Messages {
		if _, name, ok := strings.Cut(msg.Content, "My name is "); ok && msg.Role == llm.RoleUser {
			return &llm.Response{Content: "Your name is " + strings.TrimSuffix(name, ".") + "."}, nil
		}
	}
	return &llm.Response{Content: "I do not know."}, nil
}

// serveListener serves the listener agent ("Listen." its system prompt,
// its one input the message), answered by a listener it returns.
func (f *fixture) serveListener(t *testing.T) *listener {
	t.Helper()
	m := &listener{}
	a, err := agent.New(&spec.Spec{AgentName: "listener", Version: "v1", SystemText: "Listen.", UserText: "${message}", InputKeys: []string{"message"}},
		agent.WithProvider(m, "test"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { a.Close() })
	if err := f.srv.cfg.Agents.Register(a); err != nil {
		t.Fatal(err)
	}
	return m
}

// sent is the last request's messages, one "role: content" each, a call
// as "role: → name(arguments)", a result as "tool[id]: content".
func (m *listener) sent() []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []string
	for _, msg := range m.reqs[len(m.reqs)-1].Messages {
		switch {
		case len(msg.ToolCalls) > 0:
			out = append(out, msg.Role.String()+": → "+msg.ToolCalls[0].Name+string(msg.ToolCalls[0].Arguments))
		case msg.Role == llm.RoleTool:
			out = append(out, "tool["+msg.ToolCallID+"]: "+msg.Content)
		default:
			out = append(out, msg.Role.String()+": "+msg.Content)
		}
	}
	return out
}

// TestOpenAIHistory: a chat completion's earlier messages, of every role,
// are what the run's model is sent before the last user message, in
// order, streamed or not; a client's system message is taken only by an
// agent whose spec takes instructions.
func TestOpenAIHistory(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t, Config{})
	m := &listener{}
	for _, sp := range []*spec.Spec{
		{AgentName: "listener", Version: "v1", SystemText: "Listen.", UserText: "${message}", InputKeys: []string{"message"}},
		{AgentName: "steered", Version: "v1", SystemText: "Listen.", UserText: "${message}", InputKeys: []string{"message"},
			Callers: &spec.Callers{Instructions: true}},
	} {
		a, err := agent.New(sp, agent.WithProvider(m, "test"))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { a.Close() })
		if err := f.srv.cfg.Agents.Register(a); err != nil {
			t.Fatal(err)
		}
	}
	client := openai.NewClient(option.WithBaseURL(f.http.URL+"/v1/"), option.WithMaxRetries(0))
	history := []openai.ChatCompletionMessageParamUnion{
		openai.UserMessage("My name is Ada."),
		openai.AssistantMessage("Hello, Ada."),
		{OfAssistant: &openai.ChatCompletionAssistantMessageParam{ToolCalls: []openai.ChatCompletionMessageToolCallUnionParam{{
			OfFunction: &openai.ChatCompletionMessageFunctionToolCallParam{ID: "call_1",
				Function: openai.ChatCompletionMessageFunctionToolCallFunctionParam{Name: "lookup", Arguments: `{"q":"Ada"}`}}}}}},
		openai.ToolMessage("Ada Lovelace, 1815", "call_1"),
		openai.UserMessage("What is my name?"),
	}
	want := []string{"system: Listen.", "user: My name is Ada.", "assistant: Hello, Ada.", `assistant: → lookup{"q":"Ada"}`,
		"tool[call_1]: Ada Lovelace, 1815", "user: What is my name?"}
	t.Run("not streamed", func(t *testing.T) {
		c, err := client.Chat.Completions.New(ctx, openai.ChatCompletionNewParams{Model: "listener", Messages: history})
		if err != nil {
			t.Fatal(err)
		}
		if c.Choices[0].Message.Content != "Your name is Ada." {
			t.Errorf("answer %q", c.Choices[0].Message.Content)
		}
		if got := m.sent(); strings.Join(got, "\n") != strings.Join(want, "\n") {
			t.Errorf("the model was sent:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
		}
	})
	t.Run("streamed", func(t *testing.T) {
		stream := client.Chat.Completions.NewStreaming(ctx, openai.ChatCompletionNewParams{Model: "listener", Messages: history})
		acc := openai.ChatCompletionAccumulator{}
		for stream.Next() {
			acc.AddChunk(stream.Current())
		}
		if err := stream.Err(); err != nil || acc.Choices[0].Message.Content != "Your name is Ada." {
			t.Errorf("%v %+v", err, acc.ChatCompletion)
		}
		if got := m.sent(); strings.Join(got, "\n") != strings.Join(want, "\n") {
			t.Errorf("the model was sent:\n%s", strings.Join(got, "\n"))
		}
	})
	t.Run("in a conversation the server keeps", func(t *testing.T) {
		_, conv := f.do(t, "POST", "/v1/conversations", "", `{"agent": "listener"}`)
		meta := shared.Metadata{"conversation_id": conv["id"].(string)}
		say := func(text string) (string, error) {
			c, err := client.Chat.Completions.New(ctx, openai.ChatCompletionNewParams{Model: "listener", Metadata: meta,
				Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage(text)}})
			if err != nil {
				return "", err
			}
			return c.Choices[0].Message.Content, nil
		}
		if _, err := say("My name is Ada."); err != nil {
			t.Fatal(err)
		}
		if got, err := say("What is my name?"); err != nil || got != "Your name is Ada." {
			t.Errorf("the second message: %q %v", got, err)
		}
		_, err := client.Chat.Completions.New(ctx, openai.ChatCompletionNewParams{Model: "listener", Metadata: meta, Messages: history})
		var apiErr *openai.Error
		if !errors.As(err, &apiErr) || apiErr.StatusCode != 400 || !strings.Contains(apiErr.Message, "new user message only") {
			t.Errorf("a history sent to a conversation that keeps one: %v", err)
		}
		_, err = client.Chat.Completions.New(ctx, openai.ChatCompletionNewParams{Model: "listener", Metadata: shared.Metadata{"conversation_id": "conv_nobody"},
			Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("Hi.")}})
		if !errors.As(err, &apiErr) || apiErr.StatusCode != 404 {
			t.Errorf("a conversation that does not exist: %v", err)
		}
	})
	t.Run("instructions taken", func(t *testing.T) {
		msgs := append([]openai.ChatCompletionMessageParamUnion{openai.SystemMessage("Answer in French.")}, history...)
		if _, err := client.Chat.Completions.New(ctx, openai.ChatCompletionNewParams{Model: "steered", Messages: msgs}); err != nil {
			t.Fatal(err)
		}
		if got := m.sent(); len(got) != 7 || got[0] != "system: Listen." || got[1] != "system: Answer in French." {
			t.Errorf("the model was sent:\n%s", strings.Join(got, "\n"))
		}
	})
	for _, tc := range []struct {
		name   string
		params openai.ChatCompletionNewParams
		opts   []option.RequestOption
		param  string
	}{
		{"a system message, not taken", openai.ChatCompletionNewParams{Model: "listener",
			Messages: append([]openai.ChatCompletionMessageParamUnion{openai.SystemMessage("Obey me.")}, history...)}, nil, "messages[0].role"},
		{"client tools", openai.ChatCompletionNewParams{Model: "listener", Messages: history,
			Tools: []openai.ChatCompletionToolUnionParam{openai.ChatCompletionFunctionTool(shared.FunctionDefinitionParam{Name: "search"})}}, nil, "tools"},
		{"a forced call", openai.ChatCompletionNewParams{Model: "listener", Messages: history,
			ToolChoice: openai.ChatCompletionToolChoiceOptionUnionParam{OfAuto: openai.String("required")}}, nil, "tool_choice"},
		{"two answers", openai.ChatCompletionNewParams{Model: "listener", Messages: history, N: openai.Int(2)}, nil, "n"},
		{"json without a schema", openai.ChatCompletionNewParams{Model: "listener", Messages: history,
			ResponseFormat: openai.ChatCompletionNewParamsResponseFormatUnion{OfJSONObject: &shared.ResponseFormatJSONObjectParam{}}}, nil, "response_format"},
		{"a field agentry does not know", openai.ChatCompletionNewParams{Model: "listener", Messages: history},
			[]option.RequestOption{option.WithJSONSet("frobnicate", true)}, "frobnicate"},
		{"an answer after the last user message", openai.ChatCompletionNewParams{Model: "listener",
			Messages: append(append([]openai.ChatCompletionMessageParamUnion(nil), history...), openai.AssistantMessage("Ada."))}, nil, "messages[5].role"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := client.Chat.Completions.New(ctx, tc.params, tc.opts...)
			var apiErr *openai.Error
			if !errors.As(err, &apiErr) || apiErr.StatusCode != 400 || apiErr.Param != tc.param || apiErr.Type != "invalid_request_error" {
				t.Errorf("%v, want a 400 naming %s", err, tc.param)
			}
		})
	}
}

// TestOpenAINodeClientHistory: the npm "openai" client sends a chat with
// its history, streamed and not: the run's model is sent it, in order;
// its client tools are refused with the field named.
func TestOpenAINodeClientHistory(t *testing.T) {
	modules := testdb.NPM(t, "openai")
	f := newFixture(t, Config{})
	m := f.serveListener(t)
	cmd := exec.Command("node", "testdata/openai-history.cjs", f.http.URL+"/v1", "listener")
	cmd.Env = append(os.Environ(), "NODE_PATH="+modules)
	out, err := cmd.Output()
	if err != nil {
		var stderr []byte
		if ee, ok := err.(*exec.ExitError); ok {
			stderr = ee.Stderr
		}
		t.Fatalf("node: %v\n%s", err, stderr)
	}
	var got struct {
		Content, Streamed string
		Refused           struct {
			Status int
			Param  string
		}
	}
	if err := json.Unmarshal(out, &got); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	if got.Content != "Your name is Ada." || got.Streamed != "Your name is Ada." || got.Refused.Status != 400 || got.Refused.Param != "tools" {
		t.Errorf("%+v", got)
	}
	want := "system: Listen.|user: My name is Ada.|assistant: Hello, Ada.|assistant: → lookup{\"q\":\"Ada\"}|tool[call_1]: Ada Lovelace, 1815|user: What is my name?"
	if sent := strings.Join(m.sent(), "|"); sent != want {
		t.Errorf("the model was sent %s", sent)
	}
}

// TestAISDKHistory: the Vercel AI SDK (ai, with its OpenAI-compatible
// provider) sends a chat of several messages, generated and streamed:
// the run's model is sent them, in order.
func TestAISDKHistory(t *testing.T) {
	modules := testdb.NPM(t, "ai")
	f := newFixture(t, Config{})
	m := f.serveListener(t)
	var got struct{ Generated, Streamed, Error string }
	node(t, modules, nil, &got, "testdata/ai-sdk-history.cjs", f.http.URL+"/v1", "listener")
	if got.Generated != "Your name is Ada." || got.Streamed != "Your name is Ada." || got.Error != "" {
		t.Errorf("%+v", got)
	}
	if sent := strings.Join(m.sent(), "|"); sent != "system: Listen.|user: My name is Ada.|assistant: Hello, Ada.|user: What is my name?" {
		t.Errorf("the model was sent %s", sent)
	}
}

// TestOpenAIResponseFormat: a json_schema response format is the run's
// output schema when the agent has none: the answer is JSON that matches
// it, on chat completions and on the Responses API alike.
func TestOpenAIResponseFormat(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t, Config{})
	model := llm.ProviderFunc(func(context.Context, *llm.Request) (*llm.Response, error) {
		return &llm.Response{Content: `{"name": "Ada", "born": 1815}`}, nil
	})
	a, err := agent.New(&spec.Spec{AgentName: "namer", Version: "v1", SystemText: "Name them."}, agent.WithProvider(model, "test"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { a.Close() })
	if err := f.srv.cfg.Agents.Register(a); err != nil {
		t.Fatal(err)
	}
	schema := map[string]any{"type": "object", "required": []any{"name"}, "properties": map[string]any{"name": map[string]any{"type": "string"}, "born": map[string]any{"type": "integer"}}}
	client := openai.NewClient(option.WithBaseURL(f.http.URL+"/v1/"), option.WithMaxRetries(0))
	c, err := client.Chat.Completions.New(ctx, openai.ChatCompletionNewParams{Model: "namer", Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("Who?")},
		ResponseFormat: openai.ChatCompletionNewParamsResponseFormatUnion{OfJSONSchema: &shared.ResponseFormatJSONSchemaParam{
			JSONSchema: shared.ResponseFormatJSONSchemaJSONSchemaParam{Name: "person", Schema: schema}}}})
	if err != nil || c.Choices[0].Message.Content != `{"born":1815,"name":"Ada"}` {
		t.Fatalf("chat completions: %v %+v", err, c)
	}
	// Its run is of the agent with the schema: another version of it.
	if _, run := f.do(t, "GET", "/v1/runs/"+strings.TrimPrefix(c.ID, "chatcmpl-"), "", ""); !strings.HasPrefix(fmt.Sprint(run["version"]), "v1-schema.") {
		t.Errorf("the typed run: %v", run)
	}
	r, err := client.Responses.New(ctx, responses.ResponseNewParams{Model: "namer", Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("Who?")},
		Text: responses.ResponseTextConfigParam{Format: responses.ResponseFormatTextConfigUnionParam{OfJSONSchema: &responses.ResponseFormatTextJSONSchemaConfigParam{
			Name: "person", Schema: schema}}}})
	if err != nil || r.OutputText() != `{"born":1815,"name":"Ada"}` {
		t.Errorf("responses: %v %+v", err, r)
	}
	// The served agent itself is unchanged.
	c, err = client.Chat.Completions.New(ctx, openai.ChatCompletionNewParams{Model: "namer", Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("Who?")}})
	if err != nil {
		t.Fatal(err)
	}
	if _, run := f.do(t, "GET", "/v1/runs/"+strings.TrimPrefix(c.ID, "chatcmpl-"), "", ""); run["version"] != "v1" {
		t.Errorf("the run without a format: %v", run)
	}
}
