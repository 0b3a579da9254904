// Package anthropic is the provider for Anthropic's Messages API, built on
// the official SDK github.com/anthropics/anthropic-sdk-go/v2.
//
// Importing the package registers the provider "anthropic"
// (ANTHROPIC_API_KEY, ANTHROPIC_BASE_URL) with llm.Open; model names
// starting with "claude" select it.
package anthropic

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"iter"
	"net/http"
	"os"
	"strconv"
	"strings"
	"time"

	sdk "github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/anthropics/anthropic-sdk-go/v2/option"
	"github.com/anthropics/anthropic-sdk-go/v2/packages/param"

	"github.com/agentry/agentry/llm"
)

// DefaultMaxTokens is sent when a request sets no MaxOutputTokens: the
// Messages API requires a limit.
const DefaultMaxTokens = 4096

// outputTool is the tool forced on models without native JSON output so
// that their reply follows the response schema.
const outputTool = "structured_output"

// Options configure a Provider. The zero value uses ANTHROPIC_API_KEY.
type Options struct {
	APIKey     string
	BaseURL    string
	HTTPClient *http.Client
}

// Provider calls the Messages API. It is safe for concurrent use.
type Provider struct {
	// client is the one service agentry calls (see the openai provider:
	// a whole sdk.Client links every service).
	client sdk.MessageService
	hasKey bool
}

// apiVersion is the Messages API version requests ask for. SDK v2
// defaults to 2026-10-21, which rejects temperature and top_p; agentry
// keeps the version whose requests and replies it was built on.
const apiVersion = "2023-06-01"

// New returns a provider; the SDK's own retries are off (llm.Retry
// does them).
func New(o Options) *Provider {
	opts := []option.RequestOption{option.WithMaxRetries(0), option.WithMiddleware(traceContext),
		option.WithHeader("anthropic-version", apiVersion)}
	key := o.APIKey
	if key == "" {
		key = os.Getenv("ANTHROPIC_API_KEY")
	}
	if key != "" {
		// WithAPIKey makes the key the client's only credential (none is
		// read from the environment or a profile). SDK v2 sends it as a
		// bearer token; it goes as x-api-key, as before.
		opts = append(opts, option.WithAPIKey(key), option.WithHeaderDel("Authorization"), option.WithHeader("X-Api-Key", key))
	}
	if o.BaseURL != "" {
		opts = append(opts, option.WithBaseURL(o.BaseURL))
	}
	if o.HTTPClient != nil {
		opts = append(opts, option.WithHTTPClient(o.HTTPClient))
	}
	client := sdk.NewMessageService(append(defaults(key), opts...)...)
	return &Provider{client: client, hasKey: key != ""}
}

// defaults are the options sdk.NewClient would put first: the
// environment's, all of them when agentry has no key. With a key they
// are those the SDK's client takes when given a credential, without its
// credential chain, whose profile would bring its own base URL and
// workspace to a key that is not the profile's: the production
// environment, an HTTP client that gives up on a server that sends no
// headers in 10 minutes, ANTHROPIC_BASE_URL and ANTHROPIC_CUSTOM_HEADERS.
func defaults(key string) []option.RequestOption {
	if key == "" {
		return sdk.DefaultClientOptions()
	}
	client := &http.Client{Transport: http.DefaultTransport}
	if t, ok := http.DefaultTransport.(*http.Transport); ok {
		t = t.Clone()
		t.ResponseHeaderTimeout = 10 * time.Minute
		client.Transport = t
	}
	d := []option.RequestOption{option.WithHTTPClient(client), option.WithEnvironmentProduction()}
	if u := os.Getenv("ANTHROPIC_BASE_URL"); u != "" {
		d = append(d, option.WithBaseURL(u))
	}
	for line := range strings.SplitSeq(os.Getenv("ANTHROPIC_CUSTOM_HEADERS"), "\n") {
		if name, value, ok := strings.Cut(line, ":"); ok {
			d = append(d, option.WithHeader(strings.TrimSpace(name), strings.TrimSpace(value)))
		}
	}
	return d
}

// traceContext sends the run's trace context (llm.WithTraceContext).
func traceContext(r *http.Request, next option.MiddlewareNext) (*http.Response, error) {
	llm.SetTraceHeaders(r.Context(), r.Header)
	return next(r)
}

func init() {
	llm.Register("anthropic", llm.Driver{
		Open: func(model string, cfg llm.Config) (llm.Provider, error) {
			return New(Options{APIKey: cfg.APIKey, BaseURL: cfg.BaseURL}), nil
		},
		Prefixes:      []string{"claude"},
		ContextWindow: func(model string) int { return Capabilities(model).ContextWindow },
		Known:         llm.InCatalog,
		Capabilities:  Capabilities,
	})
}

// Capabilities is what a Claude model can do, by family, as Anthropic
// documents it: from Claude 3 on a model calls tools (a forced tool gives
// a schema), streams, takes images (bar Claude 3.5 Haiku) and has a
// window of 200k tokens, unknown for a generation after 4; Claude 2 and
// Instant call no tools, take no images and have 100k (2.1: 200k). A name
// of no family is unknown.
func Capabilities(model string) llm.Capabilities {
	modern := llm.Capabilities{Tools: true, StructuredOutput: true, Streaming: true, Vision: true, ContextWindow: 200_000}
	legacy := llm.Capabilities{Streaming: true, ContextWindow: 100_000}
	switch {
	case strings.HasPrefix(model, "claude-3-5-haiku"):
		modern.Vision = false // text only, unlike the Claude 3 Haiku before it
		return modern
	case strings.HasPrefix(model, "claude-3-"):
		return modern
	case strings.HasPrefix(model, "claude-2.1"):
		legacy.ContextWindow = 200_000
		return legacy
	case strings.HasPrefix(model, "claude-2"), strings.HasPrefix(model, "claude-instant"):
		return legacy
	}
	// Claude 4 and later: claude-TIER-GENERATION[-MINOR][-DATE].
	for _, tier := range []string{"claude-opus-", "claude-sonnet-", "claude-haiku-"} {
		rest, ok := strings.CutPrefix(model, tier)
		if !ok {
			continue
		}
		digits, _, _ := strings.Cut(rest, "-")
		if gen, err := strconv.Atoi(digits); err == nil && gen >= 4 {
			if gen > 4 {
				// A later generation: the same abilities, a window
				// agentry has no figure for (0 is not checked).
				modern.ContextWindow = 0
			}
			return modern
		}
	}
	return llm.Capabilities{Unknown: true}
}

// NativeJSON reports whether a model takes a JSON schema for its output
// (output_config.format); the others get a forced tool instead.
func NativeJSON(model string) bool {
	for _, p := range []string{"claude-sonnet-4-5", "claude-opus-4-1", "claude-opus-4-5", "claude-haiku-4-5", "claude-sonnet-5", "claude-opus-5"} {
		if strings.HasPrefix(model, p) {
			return true
		}
	}
	return false
}

// Generate makes one Messages call.
func (p *Provider) Generate(ctx context.Context, req *llm.Request) (*llm.Response, error) {
	params, forced, err := p.params(req)
	if err != nil {
		return nil, err
	}
	msg, err := p.client.New(ctx, params)
	if err != nil {
		return nil, apiError(ctx, req.Model, err)
	}
	resp := &llm.Response{Model: string(msg.Model), FinishReason: string(msg.StopReason), Usage: usage(msg.Usage.InputTokens,
		msg.Usage.OutputTokens, msg.Usage.CacheReadInputTokens, msg.Usage.CacheCreationInputTokens)}
	var text strings.Builder
	for _, b := range msg.Content {
		switch b.Type {
		case "text":
			text.WriteString(b.Text)
		case "tool_use":
			args := b.Input
			if len(args) == 0 {
				args = json.RawMessage("{}")
			}
			if forced && b.Name == outputTool {
				text.Reset()
				text.Write(args)
				continue
			}
			resp.ToolCalls = append(resp.ToolCalls, llm.ToolCall{ID: b.ID, Name: b.Name, Arguments: args})
		}
	}
	resp.Content = text.String()
	if msg.StopReason == "refusal" && resp.Content == "" && len(resp.ToolCalls) == 0 {
		return nil, &llm.APIError{Kind: llm.KindContentFiltered, Provider: "anthropic", Model: req.Model, Message: "the model refused to answer"}
	}
	return resp, nil
}

// Stream makes one streamed Messages call: text deltas as they come,
// tool_use input assembled from its JSON deltas, usage at the end.
func (p *Provider) Stream(ctx context.Context, req *llm.Request) iter.Seq2[llm.Chunk, error] {
	return func(yield func(llm.Chunk, error) bool) {
		params, forced, err := p.params(req)
		if err != nil {
			yield(llm.Chunk{}, err)
			return
		}
		stream := p.client.NewStreaming(ctx, params)
		defer stream.Close()
		toolIndex := map[int64]int{} // content block index -> tool call index
		forcedBlock := int64(-1)
		var in, out, cacheRead, cacheWrite int64
		var model, stop string
		finished := false
		for stream.Next() {
			ev := stream.Current()
			var c llm.Chunk
			switch ev.Type {
			case "message_start":
				model = string(ev.Message.Model)
				u := ev.Message.Usage
				in, out, cacheRead, cacheWrite = u.InputTokens, u.OutputTokens, u.CacheReadInputTokens, u.CacheCreationInputTokens
				continue
			case "content_block_start":
				if ev.ContentBlock.Type != "tool_use" {
					continue
				}
				if forced && ev.ContentBlock.Name == outputTool {
					forcedBlock = ev.Index
					continue
				}
				i := len(toolIndex)
				toolIndex[ev.Index] = i
				c.ToolCall = &llm.ToolCallDelta{Index: i, ID: ev.ContentBlock.ID, Name: ev.ContentBlock.Name}
			case "content_block_delta":
				switch {
				case ev.Delta.Type == "text_delta":
					c.Text = ev.Delta.Text
				case ev.Delta.Type == "input_json_delta" && ev.Index == forcedBlock:
					c.Text = ev.Delta.PartialJSON
				case ev.Delta.Type == "input_json_delta":
					i, ok := toolIndex[ev.Index]
					if !ok {
						continue
					}
					c.ToolCall = &llm.ToolCallDelta{Index: i, Arguments: ev.Delta.PartialJSON}
				default:
					continue
				}
			case "message_delta":
				stop = string(ev.Delta.StopReason)
				if ev.Usage.OutputTokens > 0 {
					out = ev.Usage.OutputTokens
				}
				if ev.Usage.InputTokens > 0 {
					in = ev.Usage.InputTokens
				}
				continue
			case "message_stop":
				finished = true
				u := usage(in, out, cacheRead, cacheWrite)
				c = llm.Chunk{Usage: &u, Model: model, FinishReason: stop}
			default:
				continue
			}
			if !yield(c, nil) {
				return
			}
		}
		if err := stream.Err(); err != nil {
			yield(llm.Chunk{}, llm.StreamError(apiError(ctx, req.Model, err)))
			return
		}
		if !finished {
			yield(llm.Chunk{}, &llm.APIError{Kind: llm.KindTransient, Provider: "anthropic", Model: req.Model,
				Message: "the stream ended before the model finished"})
		}
	}
}

// usage reports Anthropic's counts the agentry way: prompt tokens include
// the cached and the cache-written ones (input_tokens excludes both).
func usage(in, out, cacheRead, cacheWrite int64) llm.Usage {
	prompt := int(in + cacheRead + cacheWrite)
	return llm.Usage{PromptTokens: prompt, CompletionTokens: int(out), TotalTokens: prompt + int(out), CachedPromptTokens: int(cacheRead)}
}

// params translates a request. It reports whether the output tool was
// forced for structured output.
func (p *Provider) params(req *llm.Request) (sdk.MessageNewParams, bool, error) {
	bad := func(format string, a ...any) error {
		return &llm.APIError{Kind: llm.KindInvalidRequest, Provider: "anthropic", Model: req.Model, Message: fmt.Sprintf(format, a...)}
	}
	out := sdk.MessageNewParams{Model: sdk.Model(req.Model), MaxTokens: DefaultMaxTokens}
	if err := p.ready(req.Model); err != nil {
		return out, false, err
	}
	if req.MaxOutputTokens > 0 {
		out.MaxTokens = int64(req.MaxOutputTokens)
	}
	// SDK v2 has no temperature or top_p (API version 2026-10-21 dropped
	// them); apiVersion still takes them, so they go as extra fields.
	sampling := map[string]any{}
	if req.Temperature != nil {
		sampling["temperature"] = min(*req.Temperature, 1) // the API's range is 0..1
	}
	if req.TopP != nil {
		sampling["top_p"] = *req.TopP
	}
	if len(sampling) > 0 {
		out.SetExtraFields(sampling)
	}
	out.StopSequences = req.Stop
	msgs, system, err := messages(req.Messages)
	if err != nil {
		return out, false, bad("%v", err)
	}
	out.Messages, out.System = msgs, system
	for _, t := range req.Tools {
		tp, err := toolParam(t.Name, t.Description, t.Parameters)
		if err != nil {
			return out, false, bad("tool %s: %v", t.Name, err)
		}
		out.Tools = append(out.Tools, sdk.ToolUnionParam{OfTool: tp})
	}
	switch tc := req.ToolChoice; tc {
	case "", "auto":
	case "none":
		out.ToolChoice = sdk.ToolChoiceUnionParam{OfNone: &sdk.ToolChoiceNoneParam{}}
	case "required":
		out.ToolChoice = sdk.ToolChoiceUnionParam{OfAny: &sdk.ToolChoiceAnyParam{}}
	default:
		out.ToolChoice = sdk.ToolChoiceParamOfTool(tc)
	}
	forced := false
	if len(req.ResponseSchema) > 0 {
		var s map[string]any
		if err := json.Unmarshal(req.ResponseSchema, &s); err != nil {
			return out, false, bad("response schema: %v", err)
		}
		delete(s, "$schema")
		switch {
		case NativeJSON(req.Model):
			out.OutputConfig = sdk.OutputConfigParam{Format: sdk.JSONOutputFormatParam{Schema: s}}
		case len(req.Tools) == 0:
			// Without native JSON output, a tool whose input is the answer.
			tp, err := toolParam(outputTool, "Give your final answer as this tool's input.", req.ResponseSchema)
			if err != nil {
				return out, false, bad("response schema: %v", err)
			}
			out.Tools = append(out.Tools, sdk.ToolUnionParam{OfTool: tp})
			out.ToolChoice = sdk.ToolChoiceParamOfTool(outputTool)
			forced = true
		}
		// With other tools and no native JSON output, the agent's output
		// validation asks for corrections instead.
	}
	return out, forced, nil
}

func toolParam(name, desc string, raw json.RawMessage) (*sdk.ToolParam, error) {
	s := map[string]any{}
	if len(raw) > 0 {
		if err := json.Unmarshal(raw, &s); err != nil {
			return nil, err
		}
	}
	schema := sdk.ToolInputSchemaParam{Properties: s["properties"], ExtraFields: map[string]any{}}
	if schema.Properties == nil {
		schema.Properties = map[string]any{}
	}
	if req, ok := s["required"].([]any); ok {
		for _, r := range req {
			if rs, ok := r.(string); ok {
				schema.Required = append(schema.Required, rs)
			}
		}
	}
	for k, v := range s {
		if k != "properties" && k != "required" && k != "type" && k != "$schema" {
			schema.ExtraFields[k] = v
		}
	}
	tp := &sdk.ToolParam{Name: name, InputSchema: schema}
	if desc != "" {
		tp.Description = param.NewOpt(desc)
	}
	return tp, nil
}

// messages translates a transcript: system messages go to the system
// parameter; tool results join the user turn that follows the assistant's
// tool_use, so that roles alternate as the API requires.
func messages(ms []llm.Message) ([]sdk.MessageParam, []sdk.TextBlockParam, error) {
	var out []sdk.MessageParam
	var system []sdk.TextBlockParam
	// add appends to the last message if it has the same role (a
	// MessageParam is a union of one message type per role).
	add := func(user bool, blocks ...sdk.ContentBlockParamUnion) {
		if n := len(out); n > 0 {
			switch last := out[n-1]; {
			case user && last.OfUser != nil:
				last.OfUser.Content = append(last.OfUser.Content, blocks...)
				return
			case !user && last.OfAssistant != nil:
				last.OfAssistant.Content = append(last.OfAssistant.Content, blocks...)
				return
			}
		}
		if user {
			out = append(out, sdk.NewUserMessage(blocks...))
		} else {
			out = append(out, sdk.NewAssistantMessage(blocks...))
		}
	}
	for i, m := range ms {
		switch m.Role {
		case llm.RoleSystem, llm.RoleDeveloper:
			system = append(system, sdk.TextBlockParam{Text: m.Content})
		case llm.RoleUser:
			var blocks []sdk.ContentBlockParamUnion
			for _, im := range m.Images() {
				if im.URL != "" {
					blocks = append(blocks, sdk.NewImageBlock(sdk.URLImageSourceParam{URL: im.URL}))
				} else {
					blocks = append(blocks, sdk.NewImageBlockBase64(im.MIMEType, base64.StdEncoding.EncodeToString(im.Data)))
				}
			}
			if m.Content != "" || len(blocks) == 0 {
				blocks = append(blocks, sdk.NewTextBlock(m.Content))
			}
			add(true, blocks...)
		case llm.RoleAssistant:
			var blocks []sdk.ContentBlockParamUnion
			if m.Content != "" {
				blocks = append(blocks, sdk.NewTextBlock(m.Content))
			}
			for _, tc := range m.ToolCalls {
				args := tc.Arguments
				if !json.Valid(args) {
					args = json.RawMessage("{}")
				}
				blocks = append(blocks, sdk.NewToolUseBlock(tc.ID, args, tc.Name))
			}
			if len(blocks) == 0 {
				continue // an empty assistant turn is not allowed
			}
			add(false, blocks...)
		case llm.RoleTool:
			if m.ToolCallID == "" {
				return nil, nil, fmt.Errorf("message %d: tool message without tool_call_id", i)
			}
			isErr := strings.HasPrefix(m.Content, `{"status":"error"`)
			add(true, sdk.NewToolResultBlock(m.ToolCallID, m.Content, isErr))
		default:
			return nil, nil, fmt.Errorf("message %d: unknown role %q", i, m.Role)
		}
	}
	return out, system, nil
}

// apiError maps an SDK error to an *llm.APIError with Anthropic's own
// error type and message.
func apiError(ctx context.Context, model string, err error) error {
	if ctx.Err() != nil {
		return ctx.Err()
	}
	var ae *sdk.Error
	if !errors.As(err, &ae) {
		return llm.TransportError("anthropic", model, err)
	}
	var body struct {
		Error struct {
			Type    string `json:"type"`
			Message string `json:"message"`
		} `json:"error"`
	}
	_ = json.Unmarshal([]byte(ae.RawJSON()), &body)
	e := &llm.APIError{Kind: llm.KindForStatus(ae.StatusCode), Provider: "anthropic", Model: model, Status: ae.StatusCode,
		Message: body.Error.Message}
	if e.Message == "" {
		e.Message = http.StatusText(ae.StatusCode)
	}
	if body.Error.Type != "" {
		e.Message += " (" + body.Error.Type + ")"
	}
	if ae.Response != nil {
		e.RetryAfter = llm.ParseRetryAfter(ae.Response.Header)
	}
	switch {
	case body.Error.Type == "overloaded_error":
		e.Kind = llm.KindOverloaded
	case body.Error.Type == "rate_limit_error":
		e.Kind = llm.KindRateLimited
	case strings.Contains(body.Error.Message, "prompt is too long") || strings.Contains(body.Error.Message, "context window"):
		e.Kind = llm.KindContextTooLong
	}
	return e
}

// Ready reports what keeps the provider from making calls (no API key),
// before any: an agent refuses to start a run on it.
func (p *Provider) Ready() error { return p.ready("") }

func (p *Provider) ready(model string) error {
	if p.hasKey {
		return nil
	}
	return &llm.APIError{Kind: llm.KindAuth, Provider: "anthropic", Model: model, Message: "no API key: set ANTHROPIC_API_KEY"}
}
