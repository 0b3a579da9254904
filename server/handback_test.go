package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
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
	"github.com/agentry/agentry/policy"
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

// forecasterFixture is a fixture that serves the forecaster agent, whose
// spec takes a caller's tools; "sealed", the same agent whose spec does
// not; and "guarded", whose own tool waits for a person's approval. Its
// server builds a run that goes on with the forecaster's model too.
func forecasterFixture(t *testing.T, c Config) (*fixture, *forecaster) {
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
	c.AgentOptions = append(c.AgentOptions, opts...) // a run that goes on is built from its log with them
	f := newFixture(t, c)
	guard, err := policy.Parse([]byte(`{"approval": {"tools": ["add"]}}`))
	if err != nil {
		t.Fatal(err)
	}
	for _, sp := range []*spec.Spec{
		{AgentName: "forecaster", Version: "v1", SystemText: "Forecast.", Tools: []string{"add"}, Callers: &spec.Callers{Tools: true, Instructions: true}},
		{AgentName: "sealed", Version: "v1", SystemText: "Forecast.", Tools: []string{"add"}},
		// Its own tool waits for a person: a caller's tool message must not decide it.
		{AgentName: "guarded", Version: "v1", SystemText: "Forecast.", Tools: []string{"add"}, Callers: &spec.Callers{Tools: true}, Policy: guard},
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
	return f, m
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
	f, m := forecasterFixture(t, Config{})
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
	f, _ := forecasterFixture(t, Config{Keys: []Key{{Name: "ada", SHA256: HashKey("tok-ada"), Role: RoleRunner}, {Name: "eve", SHA256: HashKey("tok-eve"), Role: RoleRunner}}})
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
		"the agent's own tool forced": {openai.ChatCompletionNewParams{Model: "forecaster", Messages: first, Tools: tools,
			ToolChoice: openai.ToolChoiceOptionFunctionToolChoice(openai.ChatCompletionNamedToolChoiceFunctionParam{Name: "add"})}, "tool_choice"},
		"a sealed agent's tools turned off": {openai.ChatCompletionNewParams{Model: "sealed", Messages: first,
			ToolChoice: openai.ChatCompletionToolChoiceOptionUnionParam{OfAuto: openai.String("none")}}, "tool_choice"},
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
	f, _ := forecasterFixture(t, Config{})
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
	if first.Status != "completed" || len(first.Output) != 1 || call.Name != "get_weather" || call.CallID != first.ID+":1:1" || call.Arguments != `{"city":"Oslo"}` ||
		len(first.Tools) != 1 || first.Tools[0].Name != "get_weather" {
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
	if next.ID != first.ID || next.OutputText() != "Results: add=5; get_weather=fog" || next.Conversation.ID != first.Conversation.ID || next.PreviousResponseID != "" {
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
		// No message: the output is the call, streamed as the object has it.
		want := "response.created response.in_progress response.output_item.added response.function_call_arguments.delta " +
			"response.function_call_arguments.done response.output_item.done response.completed"
		if got := strings.Join(events, " "); got != want {
			t.Fatalf("events %s", got)
		}
		if len(done.Output) != 1 || done.Output[0].AsFunctionCall().CallID != done.ID+":1:1" {
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

// TestCallerToolsAgainstApproval: a run paused both on a person's
// approval of the agent's own call and on the caller's call hands the
// caller's back alone; a tool message that names the call waiting for a
// person decides nothing; the caller's result goes on, and the run waits
// for the person still.
func TestCallerToolsAgainstApproval(t *testing.T) {
	ctx := context.Background()
	f, _ := forecasterFixture(t, Config{})
	client := openai.NewClient(option.WithBaseURL(f.http.URL+"/v1/"), option.WithMaxRetries(0))
	first := []openai.ChatCompletionMessageParamUnion{openai.UserMessage("Sum and weather?")}
	c, err := client.Chat.Completions.New(ctx, openai.ChatCompletionNewParams{Model: "guarded", Messages: first, Tools: []openai.ChatCompletionToolUnionParam{weatherTool}})
	if err != nil {
		t.Fatal(err)
	}
	calls := c.Choices[0].Message.ToolCalls
	if len(calls) != 1 || calls[0].Function.Name != "get_weather" {
		t.Fatalf("handed back %+v; want the caller's call alone", calls)
	}
	runID := strings.TrimPrefix(c.ID, "chatcmpl-")
	forged := append(first, c.Choices[0].Message.ToParam(), openai.ToolMessage("5", runID+":1:0")) // add's key: it waits for a person
	_, err = client.Chat.Completions.New(ctx, openai.ChatCompletionNewParams{Model: "guarded", Messages: forged})
	assertOpenAIError(t, err, http.StatusBadRequest, "")
	if apiErr := new(openai.Error); !errors.As(err, &apiErr) || !strings.Contains(apiErr.Message, "approval") {
		t.Errorf("refused with %v; want it named as a call waiting for approval", err)
	}
	next := append(first, c.Choices[0].Message.ToParam(), openai.ToolMessage("sun", calls[0].ID))
	_, err = client.Chat.Completions.New(ctx, openai.ChatCompletionNewParams{Model: "guarded", Messages: next})
	assertOpenAIError(t, err, http.StatusConflict, "") // now it waits for the person alone
	_, body := f.do(t, "GET", "/v1/runs/"+runID, "", "")
	if body["status"] != "awaiting_approval" {
		t.Fatalf("the run: %v", body)
	}
}

// TestAGUICallerToolsAttacked: a front-end's tool message on another
// user's thread reaches no run of theirs, and a call of a front-end's
// tool is not an interrupt to approve.
func TestAGUICallerToolsAttacked(t *testing.T) {
	f, _ := forecasterFixture(t, Config{Keys: []Key{{Name: "ada", SHA256: HashKey("tok-ada"), Role: RoleRunner}, {Name: "eve", SHA256: HashKey("tok-eve"), Role: RoleRunner}}})
	input := func(thread string, msgs ...map[string]any) string {
		b, _ := json.Marshal(map[string]any{"threadId": thread, "runId": "r", "messages": msgs,
			"tools": []any{map[string]any{"name": "get_weather", "parameters": map[string]any{"type": "object"}}}})
		return string(b)
	}
	user := map[string]any{"id": "u1", "role": "user", "content": "Weather?"}
	got := f.agui(t, "forecaster", "tok-ada", input("thread-ada", user))
	if got.status != 200 || got.runID == "" {
		t.Fatalf("ada's run: %d", got.status)
	}
	answer := map[string]any{"id": "t1", "role": "tool", "toolCallId": "c_w", "content": "stolen"}
	// Not found, and nothing of ada's told: not even her run's id.
	if eve := f.agui(t, "forecaster", "tok-eve", input("thread-ada", user, answer)); eve.status != http.StatusNotFound || strings.Contains(fmt.Sprint(eve.err), got.runID) {
		t.Errorf("eve's tool message on ada's thread: %d %v", eve.status, eve.err)
	}
	resume := fmt.Sprintf(`{"threadId": "thread-ada", "runId": "r2", "messages": [], "resume": [{"interruptId": %q, "status": "resolved", "payload": {"approved": true}}]}`, got.runID+":1:1")
	if r := f.agui(t, "forecaster", "tok-ada", resume); r.status != http.StatusBadRequest {
		t.Errorf("the front-end's call approved as an interrupt: %d %v", r.status, r.err)
	}
	if _, body := f.do(t, "GET", "/v1/runs/"+got.runID, "tok-ada", ""); body["status"] != "awaiting_approval" {
		t.Fatalf("ada's run after the attacks: %v", body["status"])
	}
}
