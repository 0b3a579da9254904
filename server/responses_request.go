package server

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/agentry/agentry/agent"
	"github.com/agentry/agentry/llm"
	"github.com/agentry/agentry/spec"
)

// responseRequest is OpenAI's create-a-response request as agentry reads
// it: every field OpenAI documents is here, honoured, refused when it
// asks for what a run cannot give, or (sampling) the agent's spec's; a
// field it does not know is refused (docs/protocols.md has the table).
type responseRequest struct {
	Model              string            `json:"model"`
	Input              json.RawMessage   `json:"input"` // a string, or an array of items
	Instructions       *string           `json:"instructions"`
	PreviousResponseID string            `json:"previous_response_id"`
	Conversation       json.RawMessage   `json:"conversation"` // an id, or {"id"}
	Store              *bool             `json:"store"`
	Stream             bool              `json:"stream"`
	Background         bool              `json:"background"`
	Metadata           map[string]string `json:"metadata"`
	User               string            `json:"user"`
	SafetyIdentifier   string            `json:"safety_identifier"`
	Text               *struct {
		Format    *textFormat `json:"format"`
		Verbosity string      `json:"verbosity"`
	} `json:"text"`
	Tools             json.RawMessage `json:"tools"`
	ToolChoice        json.RawMessage `json:"tool_choice"`
	ParallelToolCalls *bool           `json:"parallel_tool_calls"`
	MaxToolCalls      *int            `json:"max_tool_calls"`
	Include           []string        `json:"include"`
	TopLogprobs       *int            `json:"top_logprobs"`
	Prompt            json.RawMessage `json:"prompt"`
	StreamOptions     json.RawMessage `json:"stream_options"`
	// The sampling and the model's limits are the agent's spec's.
	MaxOutputTokens      *int            `json:"max_output_tokens"`
	Temperature          *float64        `json:"temperature"`
	TopP                 *float64        `json:"top_p"`
	Reasoning            json.RawMessage `json:"reasoning"`
	Truncation           string          `json:"truncation"`
	ServiceTier          string          `json:"service_tier"`
	PromptCacheKey       string          `json:"prompt_cache_key"`
	PromptCacheRetention string          `json:"prompt_cache_retention"`
	ContextManagement    json.RawMessage `json:"context_management"`
}

// textFormat is the Responses API's text.format: response_format with
// the json_schema's fields beside its type.
type textFormat struct {
	Type        string          `json:"type"`
	Name        string          `json:"name"`
	Description string          `json:"description"`
	Schema      json.RawMessage `json:"schema"`
	Strict      *bool           `json:"strict"`
}

// format is f as a chat completion's response_format; nil for none.
func (f *textFormat) format() *responseFormat {
	if f == nil {
		return nil
	}
	out := &responseFormat{Type: f.Type}
	if f.Type == "json_schema" {
		out.JSONSchema = &struct {
			Name        string          `json:"name"`
			Description string          `json:"description"`
			Schema      json.RawMessage `json:"schema"`
			Strict      *bool           `json:"strict"`
		}{f.Name, f.Description, f.Schema, f.Strict}
	}
	return out
}

// textFormat is the request's text.format as a response_format.
func (req *responseRequest) textFormat() *responseFormat {
	if req.Text == nil {
		return nil
	}
	return req.Text.Format.format()
}

// responseItem is one item of a request's input: a message (of any
// role, its content a string or parts), a function call or its output.
type responseItem struct {
	Type    string          `json:"type"` // "message" (or none), "function_call", "function_call_output"
	ID      string          `json:"id"`
	Role    string          `json:"role"`
	Content json.RawMessage `json:"content"`
	Status  string          `json:"status"`
	// A function call's, and its output's.
	CallID    string          `json:"call_id"`
	Name      string          `json:"name"`
	Arguments string          `json:"arguments"`
	Output    json.RawMessage `json:"output"` // a string, or an array of parts
}

// decodeResponseRequest reads a request, refusing a field it does not
// know.
func decodeResponseRequest(data []byte) (*responseRequest, error) {
	var req responseRequest
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&req); err != nil {
		if field, ok := strings.CutPrefix(err.Error(), "json: unknown field "); ok {
			return nil, refuseParam(strings.Trim(field, `"`), "agentry does not know this field, and does not drop what it does not know")
		}
		return nil, err
	}
	return &req, nil
}

// check refuses what the request asks that a run of the agent of spec sp
// cannot give.
func (req *responseRequest) check(sp *spec.Spec) error {
	stored := req.Store == nil || *req.Store
	switch {
	case req.Instructions != nil && *req.Instructions != "" && !sp.TakesInstructions():
		return refuseParam("instructions", "the agent's own system prompt stands; its spec takes no instructions from a client (callers.instructions)")
	case len(req.Prompt) > 0 && string(req.Prompt) != "null":
		return refuseParam("prompt", "the agent's prompt is its spec's")
	case req.TopLogprobs != nil && *req.TopLogprobs > 0:
		return refuseParam("top_logprobs", "a run's answer has no log probabilities")
	case len(req.Include) > 0:
		return refuseParam("include", "a response carries its message only")
	case req.Background && !stored:
		return refuseParam("background", "a response in the background is stored (store true)")
	case req.Background && req.Stream:
		return refuseParam("stream", "a response in the background is read with GET /v1/responses/{id}, not streamed")
	case !stored && (req.PreviousResponseID != "" || len(req.Conversation) > 0):
		return refuseParam("store", "a response that continues a conversation is stored")
	case req.PreviousResponseID != "" && len(req.Conversation) > 0 && string(req.Conversation) != "null":
		return refuseParam("conversation", "name the conversation or the previous response, not both")
	}
	if f := req.textFormat(); f != nil {
		// A text format is what response_format is to chat completions.
		f := &chatRequest{ResponseFormat: f}
		if err := f.checkFormat(sp); err != nil {
			err.(*paramError).param = "text.format"
			return err
		}
	}
	return nil
}

// callers is what the request asks of tools of its own (as a chat
// completion's callers says); function_call_output items that end its
// input answer calls a run handed back.
func (req *responseRequest) callers(sp *spec.Spec) (*callerRun, error) {
	cr, err := newCallerRun(sp, req.Tools, req.ToolChoice, true)
	if err != nil {
		return nil, err
	}
	if len(cr.tools) > 0 && req.Store != nil && !*req.Store {
		return nil, refuseParam("store", "a run that hands calls back is stored, to go on when their results come")
	}
	items, err := req.items()
	if err != nil {
		return nil, err
	}
	var results []toolAnswer
	for i := len(items) - 1; i >= 0 && items[i].Type == "function_call_output"; i-- {
		out, err := items[i].output(fmt.Sprintf("input[%d]", i))
		if err != nil {
			return nil, err
		}
		results = append([]toolAnswer{{fmt.Sprintf("input[%d].call_id", i), items[i].CallID, out}}, results...)
	}
	if cr.goesOn, cr.answers, err = answering(results); err != nil {
		return nil, err
	}
	if cr.goesOn != "" && req.PreviousResponseID != "" && req.PreviousResponseID != cr.goesOn {
		return nil, refuseParam("previous_response_id", "the input answers calls of response %s, which goes on: not %s", cr.goesOn, req.PreviousResponseID)
	}
	return cr, nil
}

// items is the request's input as items: a string is one user message.
func (req *responseRequest) items() ([]responseItem, error) {
	var text string
	if json.Unmarshal(req.Input, &text) == nil {
		return []responseItem{{Role: "user", Content: req.Input}}, nil
	}
	var items []responseItem
	if err := json.Unmarshal(req.Input, &items); err != nil {
		return nil, refuseParam("input", "a string, or an array of input items")
	}
	return items, nil
}

// conversationID is the request's conversation: its id, or {"id"}.
func (req *responseRequest) conversationID() (string, error) {
	c := req.Conversation
	if len(c) == 0 || string(c) == "null" {
		return "", nil
	}
	var id string
	if json.Unmarshal(c, &id) == nil {
		return id, nil
	}
	var obj struct {
		ID string `json:"id"`
	}
	if err := json.Unmarshal(c, &obj); err != nil || obj.ID == "" {
		return "", refuseParam("conversation", "an id, or an object with one")
	}
	return obj.ID, nil
}

// turn is what the request asks a run: the history before its last user
// message, and that message as the run's input. Its instructions are the
// run's own (launch.instructions), not history.
func (req *responseRequest) turn(a *agent.Agent, sp *spec.Spec) ([]llm.Message, map[string]any, error) {
	items, err := req.items()
	if err != nil {
		return nil, nil, err
	}
	var msgs []chatMessage
	for i, it := range items {
		m, err := it.chat(fmt.Sprintf("input[%d]", i))
		if err != nil {
			return nil, nil, err
		}
		if n := len(msgs); m.Role == "assistant" && len(m.ToolCalls) > 0 && n > 0 && msgs[n-1].Role == "assistant" && len(msgs[n-1].ToolCalls) > 0 {
			msgs[n-1].ToolCalls = append(msgs[n-1].ToolCalls, m.ToolCalls...) // one turn's calls, one message
			continue
		}
		msgs = append(msgs, m)
	}
	return chatTurn(a, sp, msgs)
}

// chat is the item as a chat message: a message's parts read as text, a
// function call an assistant's call, its output a tool message.
func (it responseItem) chat(param string) (chatMessage, error) {
	switch it.Type {
	case "", "message":
		content, err := partsText(it.Content, param)
		if err != nil {
			return chatMessage{}, err
		}
		return chatMessage{Role: it.Role, Content: content}, nil
	case "function_call":
		c := chatToolCall{ID: it.CallID, Type: "function"}
		c.Function.Name, c.Function.Arguments = it.Name, it.Arguments
		return chatMessage{Role: "assistant", ToolCalls: []chatToolCall{c}}, nil
	case "function_call_output":
		out, err := it.output(param)
		if err != nil {
			return chatMessage{}, err
		}
		content, _ := json.Marshal(out)
		return chatMessage{Role: "tool", ToolCallID: it.CallID, Content: content}, nil
	}
	return chatMessage{}, refuseParam(param+".type", "%q: an input item here is a message, a function_call or its output", it.Type)
}

// output is a function_call_output item's output as text: a string, or
// its text parts joined.
func (it responseItem) output(param string) (string, error) {
	if len(it.Output) == 0 || string(it.Output) == "null" {
		return "", refuseParam(param+".output", "a function call's output is needed")
	}
	content, err := partsText(it.Output, param+".output")
	if err != nil {
		return "", err
	}
	var s string
	json.Unmarshal(content, &s)
	return s, nil
}

// partsText is a message's content as a chat message's: a string as it
// is, the text of input_text and output_text parts joined.
func partsText(content json.RawMessage, param string) (json.RawMessage, error) {
	var s string
	if json.Unmarshal(content, &s) == nil {
		return content, nil
	}
	var parts []struct {
		Type string `json:"type"`
		Text string `json:"text"`
	}
	if err := json.Unmarshal(content, &parts); err != nil {
		return nil, refuseParam(param+".content", "neither a string nor an array of parts")
	}
	var b strings.Builder
	for i, p := range parts {
		switch p.Type {
		case "input_text", "output_text", "text", "refusal":
			b.WriteString(p.Text)
		default:
			return nil, refuseParam(fmt.Sprintf("%s.content[%d].type", param, i), "%q: a message's parts are text here", p.Type)
		}
	}
	out, _ := json.Marshal(b.String())
	return out, nil
}
