package server

import (
	"bytes"
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/agentry/agentry/agent"
	"github.com/agentry/agentry/llm"
	"github.com/agentry/agentry/spec"
)

// chatRequest is OpenAI's chat completion request as agentry reads it.
// Every field OpenAI documents is here: honoured, refused when it asks
// for what an agent cannot give, or (sampling) the agent's spec's
// (docs/protocols.md has the table). A field it does not know is refused.
type chatRequest struct {
	Model         string        `json:"model"`
	Messages      []chatMessage `json:"messages"`
	Stream        bool          `json:"stream"`
	StreamOptions *struct {
		IncludeUsage bool `json:"include_usage"`
		// IncludeObfuscation pads deltas against length side channels:
		// meaningless here (agentry's deltas are whole words).
		IncludeObfuscation *bool `json:"include_obfuscation"`
	} `json:"stream_options"`
	User     string            `json:"user"`
	Metadata map[string]string `json:"metadata"`
	// ResponseFormat is the run's output schema when the agent has none.
	ResponseFormat *responseFormat `json:"response_format"`
	// Tools and a forcing ToolChoice are the client's own tools: refused
	// unless the agent's spec takes them (callers.tools).
	Tools      json.RawMessage `json:"tools"`
	ToolChoice json.RawMessage `json:"tool_choice"`
	Functions  json.RawMessage `json:"functions"`
	// FunctionCall is the old form of tool_choice.
	FunctionCall      json.RawMessage `json:"function_call"`
	ParallelToolCalls *bool           `json:"parallel_tool_calls"`
	// N above 1, logprobs, audio are refused: a run gives one text answer.
	N           *int            `json:"n"`
	Logprobs    *bool           `json:"logprobs"`
	TopLogprobs *int            `json:"top_logprobs"`
	Modalities  []string        `json:"modalities"`
	Audio       json.RawMessage `json:"audio"`
	Prediction  json.RawMessage `json:"prediction"`
	// The sampling and the model's limits are the agent's spec's.
	Temperature         *float64        `json:"temperature"`
	TopP                *float64        `json:"top_p"`
	MaxTokens           *int            `json:"max_tokens"`
	MaxCompletionTokens *int            `json:"max_completion_tokens"`
	Stop                json.RawMessage `json:"stop"`
	Seed                *int64          `json:"seed"`
	PresencePenalty     *float64        `json:"presence_penalty"`
	FrequencyPenalty    *float64        `json:"frequency_penalty"`
	LogitBias           json.RawMessage `json:"logit_bias"`
	ReasoningEffort     string          `json:"reasoning_effort"`
	Verbosity           string          `json:"verbosity"`
	ServiceTier         string          `json:"service_tier"`
	Store               *bool           `json:"store"`
	WebSearchOptions    json.RawMessage `json:"web_search_options"`
	PromptCacheKey      string          `json:"prompt_cache_key"`
	SafetyIdentifier    string          `json:"safety_identifier"`
}

// responseFormat is a request's response_format.
type responseFormat struct {
	Type       string `json:"type"` // text, json_object, json_schema
	JSONSchema *struct {
		Name        string          `json:"name"`
		Description string          `json:"description"`
		Schema      json.RawMessage `json:"schema"`
		Strict      *bool           `json:"strict"`
	} `json:"json_schema"`
}

// chatMessage is one message of a request, of any role.
type chatMessage struct {
	Role       string          `json:"role"`
	Content    json.RawMessage `json:"content"` // a string, an array of parts, or null
	Name       string          `json:"name"`
	ToolCalls  []chatToolCall  `json:"tool_calls"`
	ToolCallID string          `json:"tool_call_id"`
	Refusal    string          `json:"refusal"`
	// FunctionCall is an assistant message's call in the old form.
	FunctionCall json.RawMessage `json:"function_call"`
	Audio        json.RawMessage `json:"audio"`
}

// chatToolCall is a call an assistant message made.
type chatToolCall struct {
	ID       string `json:"id"`
	Type     string `json:"type"`
	Function struct {
		Name      string `json:"name"`
		Arguments string `json:"arguments"`
	} `json:"function"`
}

// paramError is a request refused for one of its fields: param names it
// as OpenAI's errors do ("messages[2].role").
type paramError struct {
	param, code, message string
}

func (e *paramError) Error() string { return e.param + ": " + e.message }

func refuseParam(param, format string, args ...any) *paramError {
	return &paramError{param: param, code: "unsupported_parameter", message: fmt.Sprintf(format, args...)}
}

// decodeChatRequest reads a request, refusing a field it does not know.
func decodeChatRequest(data []byte) (*chatRequest, error) {
	var req chatRequest
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&req); err != nil {
		if field, ok := strings.CutPrefix(err.Error(), "json: unknown field "); ok {
			field = strings.Trim(field, `"`)
			return nil, refuseParam(field, "agentry does not know this field, and does not drop what it does not know")
		}
		return nil, err
	}
	return &req, nil
}

// check refuses what the request asks that a run of the agent of spec
// sp cannot give.
func (req *chatRequest) check(sp *spec.Spec) error {
	switch {
	case len(req.Functions) > 0 && string(req.Functions) != "null":
		return refuseParam("functions", "the old form of tools: send tools")
	case forcing(req.FunctionCall):
		return refuseParam("function_call", "the old form of tool_choice: send tool_choice")
	case req.N != nil && *req.N != 1:
		return refuseParam("n", "a run gives one answer")
	case req.Logprobs != nil && *req.Logprobs, req.TopLogprobs != nil && *req.TopLogprobs > 0:
		return refuseParam("logprobs", "a run's answer has no log probabilities")
	case len(req.Audio) > 0 && string(req.Audio) != "null", len(req.Modalities) > 0 && !(len(req.Modalities) == 1 && req.Modalities[0] == "text"):
		return refuseParam("modalities", "a run answers in text")
	}
	return req.checkFormat(sp)
}

// callers is what the request asks of tools of its own
// (newCallerRun); tool messages that end the request answer calls a run
// handed back.
func (req *chatRequest) callers(sp *spec.Spec) (*callerRun, error) {
	cr, err := newCallerRun(sp, req.Tools, req.ToolChoice, false)
	if err != nil {
		return nil, err
	}
	var results []toolAnswer
	for i := len(req.Messages) - 1; i >= 0 && req.Messages[i].Role == "tool"; i-- {
		m := req.Messages[i]
		out, err := m.text(fmt.Sprintf("messages[%d]", i))
		if err != nil {
			return nil, err
		}
		results = append([]toolAnswer{{fmt.Sprintf("messages[%d].tool_call_id", i), m.ToolCallID, out}}, results...)
	}
	cr.goesOn, cr.answers, err = answering(results)
	return cr, err
}

// forcing says whether a tool_choice (or function_call) asks for a call:
// "required", or a named tool or function. "none" and "auto" ask nothing
// an agent does not do.
func forcing(choice json.RawMessage) bool {
	var s string
	if len(choice) == 0 || string(choice) == "null" {
		return false
	}
	if json.Unmarshal(choice, &s) == nil {
		return s != "none" && s != "auto"
	}
	return true
}

// checkFormat refuses a response_format the agent cannot honour: a JSON
// schema other than the agent's own output schema, or json_object from an
// agent that has none (it names no schema to answer in).
func (req *chatRequest) checkFormat(sp *spec.Spec) error {
	f := req.ResponseFormat
	if f == nil {
		return nil
	}
	switch f.Type {
	case "", "text":
		return nil
	case "json_object":
		if len(sp.OutputSchema) == 0 {
			return refuseParam("response_format", "the agent answers in text: it has no output schema, and json_object names none (send json_schema)")
		}
		return nil
	case "json_schema":
		if f.JSONSchema == nil || len(f.JSONSchema.Schema) == 0 {
			return refuseParam("response_format.json_schema.schema", "a json_schema response format needs its schema")
		}
		if own := sp.OutputSchema; len(own) > 0 && !sameJSON(own, f.JSONSchema.Schema) {
			return refuseParam("response_format", "the agent has an output schema of its own, and this one differs")
		}
		return nil
	}
	return refuseParam("response_format.type", "%q: want text, json_object or json_schema", f.Type)
}

// sameJSON says whether a and b are the same JSON value.
func sameJSON(a, b json.RawMessage) bool {
	var x, y any
	if json.Unmarshal(a, &x) != nil || json.Unmarshal(b, &y) != nil {
		return false
	}
	ja, _ := json.Marshal(x)
	jb, _ := json.Marshal(y)
	return bytes.Equal(ja, jb)
}

// text is the message's text: its string, or its text parts joined. A
// part that is not text is refused: the agent's input is text.
func (m chatMessage) text(param string) (string, error) {
	if len(m.Content) == 0 || string(m.Content) == "null" {
		return "", nil
	}
	var s string
	if json.Unmarshal(m.Content, &s) == nil {
		return s, nil
	}
	var parts []struct {
		Type string `json:"type"`
		Text string `json:"text"`
	}
	if err := json.Unmarshal(m.Content, &parts); err != nil {
		return "", refuseParam(param+".content", "neither a string nor an array of parts")
	}
	var b strings.Builder
	for i, p := range parts {
		switch p.Type {
		case "text", "refusal":
			b.WriteString(p.Text)
		default:
			return "", refuseParam(fmt.Sprintf("%s.content[%d].type", param, i), "%q: a message's parts are text here", p.Type)
		}
	}
	return b.String(), nil
}

// chatTurn is what a request asks a run: the history before its last
// user message, in order, and that message as the run's input.
func chatTurn(a *agent.Agent, sp *spec.Spec, msgs []chatMessage) (history []llm.Message, input map[string]any, err error) {
	last := -1
	for i, m := range msgs {
		if m.Role == "user" {
			last = i
		}
	}
	switch {
	case last < 0:
		return nil, nil, refuseParam("messages", "no user message")
	case last < len(msgs)-1:
		return nil, nil, refuseParam(fmt.Sprintf("messages[%d].role", last+1),
			"%q after the last user message: a run starts from a user's message, or goes on from the results of calls it handed back", msgs[last+1].Role)
	}
	for i, m := range msgs[:last] {
		msg, err := m.history(fmt.Sprintf("messages[%d]", i), sp.TakesInstructions())
		if err != nil {
			return nil, nil, err
		}
		history = append(history, msg)
	}
	text, err := msgs[last].text(fmt.Sprintf("messages[%d]", last))
	if err != nil {
		return nil, nil, err
	}
	input, err = a.MessageInput(text)
	if err != nil {
		return nil, nil, refuseParam(fmt.Sprintf("messages[%d].content", last), "%v", err)
	}
	return history, input, nil
}

// history is an earlier message of the request as the model is sent it.
// A system or developer message is an instruction of the client's,
// taken when the agent's spec takes them (takes).
func (m chatMessage) history(param string, takes bool) (llm.Message, error) {
	text, err := m.text(param)
	if err != nil {
		return llm.Message{}, err
	}
	switch m.Role {
	case "user":
		return llm.Message{Role: llm.RoleUser, Content: text}, nil
	case "assistant":
		msg := llm.Message{Role: llm.RoleAssistant, Content: cmp.Or(text, m.Refusal)}
		for j, c := range m.ToolCalls {
			if c.ID == "" || c.Function.Name == "" {
				return llm.Message{}, refuseParam(fmt.Sprintf("%s.tool_calls[%d]", param, j), "a call needs its id and its function's name")
			}
			args := json.RawMessage(c.Function.Arguments)
			if !json.Valid(args) {
				return llm.Message{}, refuseParam(fmt.Sprintf("%s.tool_calls[%d].function.arguments", param, j), "not JSON")
			}
			msg.ToolCalls = append(msg.ToolCalls, llm.ToolCall{ID: c.ID, Name: c.Function.Name, Arguments: args})
		}
		if len(m.FunctionCall) > 0 && string(m.FunctionCall) != "null" {
			return llm.Message{}, refuseParam(param+".function_call", "the old form of a call; send tool_calls")
		}
		return msg, nil
	case "tool":
		if m.ToolCallID == "" {
			return llm.Message{}, refuseParam(param+".tool_call_id", "a tool message answers a call: name it")
		}
		return llm.Message{Role: llm.RoleTool, Content: text, ToolCallID: m.ToolCallID, Name: m.Name}, nil
	case "system", "developer":
		if !takes {
			return llm.Message{}, refuseParam(param+".role", "%q: the agent's own system prompt stands; its spec takes no instructions from a client (callers.instructions)", m.Role)
		}
		role, _ := llm.ParseRole(m.Role)
		return llm.Message{Role: role, Content: text}, nil
	}
	return llm.Message{}, refuseParam(param+".role", "%q: want user, assistant or tool", m.Role)
}

// errorsAsParam is the paramError in err, if any.
func errorsAsParam(err error) (*paramError, bool) {
	var pe *paramError
	return pe, errors.As(err, &pe)
}

// typed is the agent a run of a request that asks for format (a
// json_schema response format) is of: a with the format's schema when it
// has none of its own (owned: the run closes it), else a itself.
func typed(a *agent.Agent, sp *spec.Spec, format *responseFormat) (run *agent.Agent, owned bool, err error) {
	if format == nil || format.Type != "json_schema" || format.JSONSchema == nil || len(sp.OutputSchema) > 0 {
		return a, false, nil
	}
	t, err := a.WithOutputSchema(format.JSONSchema.Schema)
	if err != nil {
		return nil, false, refuseParam("response_format.json_schema.schema", "%v", err)
	}
	return t, true, nil
}
