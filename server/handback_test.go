package server

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/responses"
	"github.com/openai/openai-go/v3/shared"

	"github.com/agentry/agentry/agent"
	"github.com/agentry/agentry/llm"
	"github.com/agentry/agentry/spec"
	"github.com/agentry/agentry/store"
	"github.com/agentry/agentry/tool"
)

// forecaster is a model that adds with the agent's tool and asks the
// caller's get_weather in one turn, then answers from both results; it
// keeps each request's tool choice.
type forecaster struct {
	mu      sync.Mutex
	choices []string
}

func (m *forecaster) Generate(_ context.Context, req *llm.Request) (*llm.Response, error) {
	m.mu.Lock()
	m.choices = append(m.choices, req.ToolChoice)
	m.mu.Unlock()
	if last := req.Messages[len(req.Messages)-1]; last.Role == llm.RoleTool {
		var got []string
		brief := ""
		for _, msg := range req.Messages {
			switch {
			case msg.Role == llm.RoleTool:
				got = append(got, msg.Name+"="+msg.Content)
			case msg.Role == llm.RoleSystem && msg.Content == "Be brief.":
				brief = " (brief)" // the caller's instructions reached the model
			}
		}
		return &llm.Response{Content: "Results: " + strings.Join(got, "; ") + brief}, nil
	}
	return &llm.Response{Content: "Let me see.", ToolCalls: []llm.ToolCall{
		{ID: "c_add", Name: "add", Arguments: json.RawMessage(`{"a":2,"b":3}`)},
		{ID: "c_w", Name: "get_weather", Arguments: json.RawMessage(`{"city":"Oslo"}`)},
	}}, nil
}

// serveForecaster serves the forecaster agent, whose spec takes a
// caller's tools, and "sealed", the same agent whose spec does not.
func (f *fixture) serveForecaster(t *testing.T) *forecaster {
	t.Helper()
	m := &forecaster{}
	add := tool.Must(tool.Func("add", "Add two integers.", func(_ context.Context, in struct {
		A int `json:"a"`
		B int `json:"b"`
	}) (int, error) {
		return in.A + in.B, nil
	},
		tool.WithIdempotency(tool.Safe)))
	reg, err := tool.NewRegistry(add)
	if err != nil {
		t.Fatal(err)
	}
	opts := []agent.Option{agent.WithProvider(m, "test"), agent.WithTools(reg)}
	for _, sp := range []*spec.Spec{
		{AgentName: "forecaster", Version: "v1", SystemText: "Forecast.", Tools: []string{"add"}, Callers: &spec.Callers{Tools: true, Instructions: true}},
		{AgentName: "sealed", Version: "v1", SystemText: "Forecast.", Tools: []string{"add"}},
	} {
		a, err := agent.New(sp, opts...)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { a.Close() })
		if err := f.srv.cfg.Agents.Register(a); err != nil {
			t.Fatal(err)
		}
	}
	// A run that goes on is built from its log with the server's options.
	f.srv.cfg.AgentOptions = append(f.srv.cfg.AgentOptions, opts...)
	return m
}

var weatherTool = openai.ChatCompletionToolUnionParam{OfFunction: &openai.ChatCompletionFunctionToolParam{Function: shared.FunctionDefinitionParam{
	Name: "get_weather", Description: openai.String("The weather in a city."),
	Parameters: shared.FunctionParameters{"type": "object", "properties": map[string]any{"city": map[string]any{"type": "string"}}}}}}

// TestOpenAICallerTools: an agent that takes a caller's tools hands a
// call of one back as tool_calls (its own tool run), and the next
// request's tool message goes on with the same run, streamed or not;
// a forcing tool_choice holds for the first model call.
func TestOpenAICallerTools(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t, Config{})
	m := f.serveForecaster(t)
	client := openai.NewClient(option.WithBaseURL(f.http.URL+"/v1/"), option.WithMaxRetries(0))
	first := []openai.ChatCompletionMessageParamUnion{openai.UserMessage("Sum 2 and 3, and the weather in Oslo?")}
	params := openai.ChatCompletionNewParams{Model: "forecaster", Messages: first, Tools: []openai.ChatCompletionToolUnionParam{weatherTool},
		ToolChoice: openai.ChatCompletionToolChoiceOptionUnionParam{OfAuto: openai.String("required")}}

	t.Run("not streamed", func(t *testing.T) {
		c, err := client.Chat.Completions.New(ctx, params)
		if err != nil {
			t.Fatal(err)
		}
		calls := c.Choices[0].Message.ToolCalls
		if c.Choices[0].FinishReason != "tool_calls" || len(calls) != 1 || calls[0].Function.Name != "get_weather" || calls[0].Function.Arguments != `{"city":"Oslo"}` {
			t.Fatalf("answer %+v; want the caller's call handed back, alone", c.Choices[0])
		}
		runID := strings.TrimPrefix(c.ID, "chatcmpl-")
		if calls[0].ID != runID+":1:1" {
			t.Fatalf("call id %q; want the call's key", calls[0].ID)
		}
		if run, _ := f.st.Get(ctx, runID); run.Status != store.AwaitingApproval {
			t.Fatalf("run %s", run.Status)
		}
		next := append(first, c.Choices[0].Message.ToParam(), openai.ToolMessage("sunny, 21C", calls[0].ID))
		c2, err := client.Chat.Completions.New(ctx, openai.ChatCompletionNewParams{Model: "forecaster", Messages: next, Tools: params.Tools})
		if err != nil {
			t.Fatal(err)
		}
		if got := c2.Choices[0].Message.Content; got != "Results: add=5; get_weather=sunny, 21C" || c2.ID != c.ID || c2.Choices[0].FinishReason != "stop" {
			t.Fatalf("went on with %q (%s, %s); want both results, the same run", got, c2.ID, c2.Choices[0].FinishReason)
		}
		m.mu.Lock()
		choices := strings.Join(m.choices, ",")
		m.mu.Unlock()
		if choices != "required," {
			t.Errorf("tool choices %q; want required on the first call only", choices)
		}
		t.Run("again", func(t *testing.T) {
			// The calls were answered: the run waits for nothing now.
			_, err := client.Chat.Completions.New(ctx, openai.ChatCompletionNewParams{Model: "forecaster", Messages: next})
			assertOpenAIError(t, err, http.StatusConflict, "")
		})
	})
	t.Run("streamed", func(t *testing.T) {
		s := client.Chat.Completions.NewStreaming(ctx, params)
		var acc openai.ChatCompletionAccumulator
		for s.Next() {
			acc.AddChunk(s.Current())
		}
		if err := s.Err(); err != nil {
			t.Fatal(err)
		}
		calls := acc.Choices[0].Message.ToolCalls
		if acc.Choices[0].FinishReason != "tool_calls" || len(calls) != 1 || calls[0].Function.Name != "get_weather" {
			t.Fatalf("streamed %+v", acc.Choices[0])
		}
		next := append(first, acc.Choices[0].Message.ToParam(), openai.ToolMessage("rain", calls[0].ID))
		s = client.Chat.Completions.NewStreaming(ctx, openai.ChatCompletionNewParams{Model: "forecaster", Messages: next, Tools: params.Tools})
		acc = openai.ChatCompletionAccumulator{}
		for s.Next() {
			acc.AddChunk(s.Current())
		}
		if err := s.Err(); err != nil {
			t.Fatal(err)
		}
		if got := acc.Choices[0].Message.Content; got != "Results: add=5; get_weather=rain" {
			t.Fatalf("went on with %q", got)
		}
	})
}

// TestCallerToolsAttacked: tools are refused by an agent whose spec
// takes none, and a request cannot answer, or go on with, a run that is
// not its caller's, or that does not wait for it.
func TestCallerToolsAttacked(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t, Config{Keys: []Key{{Name: "ada", SHA256: HashKey("tok-ada"), Role: RoleRunner}, {Name: "eve", SHA256: HashKey("tok-eve"), Role: RoleRunner}}})
	f.serveForecaster(t)
	as := func(token string) openai.Client {
		return openai.NewClient(option.WithBaseURL(f.http.URL+"/v1/"), option.WithMaxRetries(0), option.WithAPIKey(token))
	}
	ada, eve := as("tok-ada"), as("tok-eve")
	first := []openai.ChatCompletionMessageParamUnion{openai.UserMessage("Weather?")}
	tools := []openai.ChatCompletionToolUnionParam{weatherTool}
	for name, tc := range map[string]struct {
		params openai.ChatCompletionNewParams
		param  string
	}{
		"tools to a sealed agent": {openai.ChatCompletionNewParams{Model: "sealed", Messages: first, Tools: tools}, "tools"},
		"a forced call of a sealed agent": {openai.ChatCompletionNewParams{Model: "sealed", Messages: first,
			ToolChoice: openai.ChatCompletionToolChoiceOptionUnionParam{OfAuto: openai.String("required")}}, "tool_choice"},
		"a choice of no tool": {openai.ChatCompletionNewParams{Model: "forecaster", Messages: first, Tools: tools,
			ToolChoice: openai.ToolChoiceOptionFunctionToolChoice(openai.ChatCompletionNamedToolChoiceFunctionParam{Name: "rm"})}, "tool_choice"},
		"a tool named as the agent's": {openai.ChatCompletionNewParams{Model: "forecaster", Messages: first, Tools: []openai.ChatCompletionToolUnionParam{
			{OfFunction: &openai.ChatCompletionFunctionToolParam{Function: shared.FunctionDefinitionParam{Name: "add"}}}}}, "tools"},
		"a result of a call no run made": {openai.ChatCompletionNewParams{Model: "forecaster", Messages: append(first, openai.ToolMessage("x", "call_9"))}, "messages[1].tool_call_id"},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := ada.Chat.Completions.New(ctx, tc.params)
			assertOpenAIError(t, err, http.StatusBadRequest, tc.param)
		})
	}
	c, err := ada.Chat.Completions.New(ctx, openai.ChatCompletionNewParams{Model: "forecaster", Messages: first, Tools: tools})
	if err != nil {
		t.Fatal(err)
	}
	key := c.Choices[0].Message.ToolCalls[0].ID
	next := append(first, c.Choices[0].Message.ToParam(), openai.ToolMessage("stolen", key))
	t.Run("another user's run", func(t *testing.T) {
		_, err := eve.Chat.Completions.New(ctx, openai.ChatCompletionNewParams{Model: "forecaster", Messages: next})
		assertOpenAIError(t, err, http.StatusNotFound, "")
	})
	t.Run("another agent's run", func(t *testing.T) {
		_, err := ada.Chat.Completions.New(ctx, openai.ChatCompletionNewParams{Model: "sealed", Messages: next})
		assertOpenAIError(t, err, http.StatusBadRequest, "")
	})
	t.Run("a call it did not hand back", func(t *testing.T) {
		run := strings.TrimPrefix(c.ID, "chatcmpl-")
		bad := append(first, openai.ToolMessage("x", run+":1:0")) // the agent's own call, run already
		_, err := ada.Chat.Completions.New(ctx, openai.ChatCompletionNewParams{Model: "forecaster", Messages: bad})
		assertOpenAIError(t, err, http.StatusBadRequest, "")
	})
	if run, _ := f.st.Get(ctx, strings.TrimPrefix(c.ID, "chatcmpl-")); run.Status != store.AwaitingApproval {
		t.Fatalf("after the attacks the run is %s; want it still waiting", run.Status)
	}
}

// assertOpenAIError fails unless err is OpenAI's error of status, naming
// param when one is given.
func assertOpenAIError(t *testing.T, err error, status int, param string) {
	t.Helper()
	var apiErr *openai.Error
	if !errors.As(err, &apiErr) || apiErr.StatusCode != status || param != "" && apiErr.Param != param {
		t.Fatalf("%v (%s); want a %d naming %q", err, rawOf(apiErr), status, param)
	}
}

func rawOf(e *openai.Error) string {
	if e == nil {
		return ""
	}
	return e.RawJSON()
}

// TestResponsesCallerTools: the official Go client's Responses API with
// a function tool: the call is handed back as a function_call item (its
// call id the call's key), streamed with its events in order, and the
// function_call_output of the next request, chained or whole, goes on
// with the same response's run; retrieved, the response shows its answer.
func TestResponsesCallerTools(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t, Config{})
	f.serveForecaster(t)
	client := openai.NewClient(option.WithBaseURL(f.http.URL+"/v1/"), option.WithMaxRetries(0))
	tools := []responses.ToolUnionParam{{OfFunction: &responses.FunctionToolParam{Name: "get_weather",
		Parameters: map[string]any{"type": "object", "properties": map[string]any{"city": map[string]any{"type": "string"}}}}}}
	params := responses.ResponseNewParams{Model: "forecaster", Tools: tools,
		Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("Weather in Oslo?")}}
	first, err := client.Responses.New(ctx, params)
	if err != nil {
		t.Fatal(err)
	}
	var call responses.ResponseFunctionToolCall
	for _, item := range first.Output {
		if item.Type == "function_call" {
			call = item.AsFunctionCall()
		}
	}
	if first.Status != "completed" || call.Name != "get_weather" || call.CallID != first.ID+":1:1" || call.Arguments != `{"city":"Oslo"}` {
		t.Fatalf("the first response: %s", first.RawJSON())
	}
	output := func(callID, out string) responses.ResponseNewParamsInputUnion {
		item := responses.ResponseInputItemParamOfFunctionCallOutput(out)
		item.OfFunctionCallOutput.CallID = openai.String(callID)
		return responses.ResponseNewParamsInputUnion{OfInputItemList: responses.ResponseInputParam{item}}
	}
	next, err := client.Responses.New(ctx, responses.ResponseNewParams{Model: "forecaster", Tools: tools,
		PreviousResponseID: openai.String(first.ID), Input: output(call.CallID, "fog")})
	if err != nil {
		t.Fatal(err)
	}
	if next.ID != first.ID || next.OutputText() != "Results: add=5; get_weather=fog" || next.Conversation.ID != first.Conversation.ID {
		t.Fatalf("went on with %s", next.RawJSON())
	}
	if got, err := client.Responses.Get(ctx, first.ID, responses.ResponseGetParams{}); err != nil || got.OutputText() != next.OutputText() {
		t.Errorf("retrieved: %v %v", got, err)
	}
	t.Run("streamed", func(t *testing.T) {
		s := client.Responses.NewStreaming(ctx, params)
		var events []string
		var done responses.Response
		for s.Next() {
			e := s.Current()
			events = append(events, e.Type)
			if e.Type == "response.completed" {
				done = e.Response
			}
		}
		if err := s.Err(); err != nil {
			t.Fatal(err)
		}
		want := "response.output_item.done response.output_item.added response.function_call_arguments.delta " +
			"response.function_call_arguments.done response.output_item.done response.completed"
		if got := strings.Join(events, " "); !strings.HasSuffix(got, want) {
			t.Fatalf("events %s", got)
		}
		last := done.Output[len(done.Output)-1].AsFunctionCall()
		if last.CallID != done.ID+":1:1" {
			t.Fatalf("the completed response: %s", done.RawJSON())
		}
	})
	t.Run("refused", func(t *testing.T) {
		_, err := client.Responses.New(ctx, responses.ResponseNewParams{Model: "sealed", Tools: tools, Input: params.Input})
		assertOpenAIError(t, err, http.StatusBadRequest, "tools")
		_, err = client.Responses.New(ctx, responses.ResponseNewParams{Model: "forecaster", Input: output("call_9", "x")})
		assertOpenAIError(t, err, http.StatusBadRequest, "input[0].call_id")
	})
}
