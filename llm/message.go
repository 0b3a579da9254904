// Package llm is agentry's provider-neutral model interface: messages, tool
// calls, tool specs, usage, typed errors, retries and pricing.
//
// No vendor type appears here. A provider package (llm/scripted,
// llm/openai, ...) translates between these types and its wire format.
package llm

import (
	"context"
	"encoding/json"
	"fmt"
	"iter"
	"strconv"
)

// Role is the author of a message. It is a small number in memory (a
// transcript holds one a message) and its name in JSON and text.
type Role uint8

// The roles of a transcript.
const (
	roleNone Role = iota
	RoleSystem
	// RoleDeveloper is OpenAI's name for instructions to reasoning models;
	// providers without it treat it as system.
	RoleDeveloper
	RoleUser
	RoleAssistant
	RoleTool
)

var roleNames = [...]string{roleNone: "", RoleSystem: "system", RoleDeveloper: "developer", RoleUser: "user", RoleAssistant: "assistant", RoleTool: "tool"}

// String is the role's name: system, developer, user, assistant, tool.
func (r Role) String() string {
	if int(r) < len(roleNames) {
		return roleNames[r]
	}
	return "role(" + strconv.Itoa(int(r)) + ")"
}

// ParseRole returns the role named s.
func ParseRole(s string) (Role, error) {
	for r, name := range roleNames {
		if name == s && s != "" {
			return Role(r), nil
		}
	}
	return 0, fmt.Errorf("llm: unknown role %q (want system, developer, user, assistant or tool)", s)
}

// MarshalText writes the role's name.
func (r Role) MarshalText() ([]byte, error) { return []byte(r.String()), nil }

// UnmarshalText reads a role's name.
func (r *Role) UnmarshalText(b []byte) error {
	v, err := ParseRole(string(b))
	if err != nil {
		return err
	}
	*r = v
	return nil
}

// Message is one entry of a transcript.
type Message struct {
	Role    Role   `json:"role"`
	Content string `json:"content,omitempty"`
	// ToolCalls are the calls an assistant message asks for.
	ToolCalls []ToolCall `json:"tool_calls,omitempty"`
	// ToolCallID links a tool message to the call it answers.
	ToolCallID string `json:"tool_call_id,omitempty"`
	// Name is the tool's name on a tool message.
	Name string `json:"name,omitempty"`
	// Media is what a user message carries besides its text (images);
	// nil for most messages, which then cost nothing more.
	Media *Media `json:"media,omitempty"`
}

// Media is what a message carries besides its text.
type Media struct {
	Images []Image `json:"images,omitempty"`
}

// Image is a picture in a message: by URL, or its bytes with their MIME
// type (image/png, image/jpeg, image/gif, image/webp). In JSON the bytes
// are base64.
type Image struct {
	URL      string `json:"url,omitempty"`
	Data     []byte `json:"data,omitempty"`
	MIMEType string `json:"mime_type,omitempty"`
}

// Images are the images m carries.
func (m *Message) Images() []Image {
	if m.Media == nil {
		return nil
	}
	return m.Media.Images
}

// ToolCall is a model's request to run one tool.
type ToolCall struct {
	ID        string          `json:"id"`
	Name      string          `json:"name"`
	Arguments json.RawMessage `json:"arguments"`
	// Signature is opaque vendor data that must travel back with the call
	// (Gemini's thought signature).
	Signature []byte `json:"signature,omitempty"`
}

// ToolSpec describes a tool to the model.
type ToolSpec struct {
	Name        string `json:"name"`
	Description string `json:"description,omitempty"`
	// Parameters is the JSON Schema of the arguments object.
	Parameters json.RawMessage `json:"parameters,omitempty"`
}

// Usage counts the tokens of one or more model calls.
type Usage struct {
	PromptTokens     int `json:"prompt_tokens"`
	CompletionTokens int `json:"completion_tokens"`
	TotalTokens      int `json:"total_tokens"`
	// CachedPromptTokens is the part of PromptTokens served from the
	// provider's prompt cache, priced differently where the vendor does so.
	CachedPromptTokens int `json:"cached_prompt_tokens,omitempty"`
}

// Add adds u2 to u. A TotalTokens of zero in u2 counts as prompt plus
// completion tokens.
func (u *Usage) Add(u2 Usage) {
	u.PromptTokens += u2.PromptTokens
	u.CompletionTokens += u2.CompletionTokens
	u.CachedPromptTokens += u2.CachedPromptTokens
	t := u2.TotalTokens
	if t == 0 {
		t = u2.PromptTokens + u2.CompletionTokens
	}
	u.TotalTokens += t
}

// Request is one model call.
type Request struct {
	// Model is the model id as the provider knows it, without any
	// "provider:" prefix.
	Model    string     `json:"model"`
	Messages []Message  `json:"messages"`
	Tools    []ToolSpec `json:"tools,omitempty"`
	// Temperature, TopP: nil means the provider's default.
	Temperature     *float64 `json:"temperature,omitempty"`
	TopP            *float64 `json:"top_p,omitempty"`
	MaxOutputTokens int      `json:"max_output_tokens,omitempty"`
	// ResponseSchema asks for structured output matching this JSON Schema
	// where the provider supports it.
	ResponseSchema json.RawMessage `json:"response_schema,omitempty"`
	// ToolChoice is "" or "auto" (the model decides), "none", "required"
	// (some tool), or the name of the one tool to call.
	ToolChoice string `json:"tool_choice,omitempty"`
	// Stop sequences end the reply where the model writes one.
	Stop []string `json:"stop,omitempty"`
}

// Response is a model's reply to one Request.
type Response struct {
	// Content is the assistant's text.
	Content string `json:"content,omitempty"`
	// ToolCalls are the tools the model wants run, in order.
	ToolCalls []ToolCall `json:"tool_calls,omitempty"`
	Usage     Usage      `json:"usage"`
	// Model is the model that answered, as the provider reports it.
	Model string `json:"model,omitempty"`
	// Provider is set by a Router to the provider that answered.
	Provider string `json:"provider,omitempty"`
	// FinishReason is the provider's stop reason, when it gives one.
	FinishReason string `json:"finish_reason,omitempty"`
}

// Message returns the response as an assistant message of a transcript.
func (r *Response) Message() Message {
	return Message{Role: RoleAssistant, Content: r.Content, ToolCalls: r.ToolCalls}
}

// Provider generates model replies. Implementations must be safe for
// concurrent use. A provider that holds something open (a connection
// pool, a local model process) may implement io.Closer: the agent that
// uses it closes it with its own Close.
type Provider interface {
	Generate(ctx context.Context, req *Request) (*Response, error)
}

// Chunk is one piece of a streamed reply. Text deltas, tool-call deltas and
// usage travel in the same stream; any field may be empty.
type Chunk struct {
	// Text is a delta of the assistant's text.
	Text string `json:"text,omitempty"`
	// ToolCall is a delta of one tool call, identified by Index. ID and Name
	// arrive once; Arguments are appended in order.
	ToolCall *ToolCallDelta `json:"tool_call,omitempty"`
	// Usage, when set, is the usage of the whole call so far.
	Usage *Usage `json:"usage,omitempty"`
	// Model and FinishReason arrive once, usually at the end.
	Model        string `json:"model,omitempty"`
	FinishReason string `json:"finish_reason,omitempty"`
}

// ToolCallDelta is a fragment of a streamed tool call.
type ToolCallDelta struct {
	Index     int    `json:"index"`
	ID        string `json:"id,omitempty"`
	Name      string `json:"name,omitempty"`
	Arguments string `json:"arguments,omitempty"`
	Signature []byte `json:"signature,omitempty"`
}

// Streamer is implemented by providers that can stream a reply. The
// sequence ends after the last chunk or the first error.
type Streamer interface {
	Stream(ctx context.Context, req *Request) iter.Seq2[Chunk, error]
}

// Collect assembles a streamed reply into a Response, calling onChunk (which
// may be nil) for each chunk as it arrives. Tool calls are recognised in
// any chunk, not only the first. On error the partial response is returned
// with it.
func Collect(seq iter.Seq2[Chunk, error], onChunk func(Chunk)) (*Response, error) {
	c := &collector{onChunk: onChunk}
	seq(c.push)
	c.finish()
	return &c.resp, c.err
}

// collector assembles one reply. It is one object, with room for the first
// tool call, because every model call of a run with a listener streams.
type collector struct {
	resp    Response
	onChunk func(Chunk)
	err     error
	text    []byte // the text once a second piece came; before, resp.Content is the one piece
	args    []partial
	oneCall [1]ToolCall
	oneArgs [1]partial
}

// partial is a tool call's arguments so far: a first fragment as it came,
// bytes once a second one is appended.
type partial struct {
	first string
	buf   []byte
}

func (c *collector) push(ch Chunk, err error) bool {
	if err != nil {
		c.err = err
		return false
	}
	if c.onChunk != nil {
		c.onChunk(ch)
	}
	c.addText(ch.Text)
	if d := ch.ToolCall; d != nil {
		c.addCall(d)
	}
	if ch.Usage != nil {
		c.resp.Usage = *ch.Usage
	}
	if ch.Model != "" {
		c.resp.Model = ch.Model
	}
	if ch.FinishReason != "" {
		c.resp.FinishReason = ch.FinishReason
	}
	return true
}

func (c *collector) addText(s string) {
	switch {
	case s == "":
	case c.text != nil:
		c.text = append(c.text, s...)
	case c.resp.Content == "":
		c.resp.Content = s
	default:
		c.text = make([]byte, 0, 2*(len(c.resp.Content)+len(s)))
		c.text = append(append(c.text, c.resp.Content...), s...)
	}
}

func (c *collector) addCall(d *ToolCallDelta) {
	for len(c.resp.ToolCalls) <= d.Index {
		if c.resp.ToolCalls == nil {
			c.resp.ToolCalls, c.args = c.oneCall[:0], c.oneArgs[:0]
		}
		c.resp.ToolCalls = append(c.resp.ToolCalls, ToolCall{})
		c.args = append(c.args, partial{})
	}
	call := &c.resp.ToolCalls[d.Index]
	if d.ID != "" {
		call.ID = d.ID
	}
	if d.Name != "" {
		call.Name = d.Name
	}
	if d.Signature != nil {
		call.Signature = d.Signature
	}
	a := &c.args[d.Index]
	switch {
	case d.Arguments == "":
	case a.buf != nil:
		a.buf = append(a.buf, d.Arguments...)
	case a.first == "":
		a.first = d.Arguments
	default:
		a.buf = make([]byte, 0, 2*len(a.first)+len(d.Arguments)+16)
		a.buf = append(append(a.buf, a.first...), d.Arguments...)
	}
}

func (c *collector) finish() {
	if c.text != nil {
		c.resp.Content = string(c.text)
	}
	for i := range c.resp.ToolCalls {
		a := c.args[i]
		switch {
		case a.buf != nil:
			c.resp.ToolCalls[i].Arguments = json.RawMessage(a.buf)
		case a.first != "":
			c.resp.ToolCalls[i].Arguments = json.RawMessage(a.first)
		default:
			c.resp.ToolCalls[i].Arguments = json.RawMessage("{}")
		}
	}
}
