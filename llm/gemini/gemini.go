// Package gemini is the provider for the Gemini API's generateContent,
// built on the official SDK google.golang.org/genai.
//
// Importing the package registers the provider "gemini" (GEMINI_API_KEY or
// GOOGLE_API_KEY) with llm.Open; model names starting with "gemini"
// select it.
package gemini

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"iter"
	"mime"
	"net/http"
	"os"
	"path"
	"strconv"
	"strings"
	"time"

	"google.golang.org/genai"

	"github.com/agentry/agentry/llm"
	"github.com/agentry/agentry/schema"
)

// Options configure a Provider. The zero value uses GEMINI_API_KEY (or
// GOOGLE_API_KEY) against the public Gemini API.
type Options struct {
	APIKey     string
	BaseURL    string
	HTTPClient *http.Client
}

// Provider calls generateContent. It is safe for concurrent use.
type Provider struct {
	client *genai.Client
	err    error // from building the client, reported on each call
}

// New returns a provider. The SDK retries nothing unless asked, so
// llm.Retry is the only retry layer.
func New(o Options) *Provider {
	key := o.APIKey
	if key == "" {
		key = os.Getenv("GEMINI_API_KEY")
	}
	if key == "" {
		key = os.Getenv("GOOGLE_API_KEY")
	}
	if key == "" {
		return &Provider{err: errors.New("no API key: set GEMINI_API_KEY")}
	}
	hc := &http.Client{}
	if o.HTTPClient != nil {
		c := *o.HTTPClient
		hc = &c
	}
	hc.Transport = llm.TraceTransport(hc.Transport) // the run's trace context as traceparent and tracestate
	cfg := &genai.ClientConfig{APIKey: key, Backend: genai.BackendGeminiAPI, HTTPClient: hc}
	if o.BaseURL != "" {
		cfg.HTTPOptions.BaseURL = o.BaseURL
	}
	c, err := genai.NewClient(context.Background(), cfg)
	return &Provider{client: c, err: err}
}

func init() {
	llm.Register("gemini", llm.Driver{
		Open: func(model string, cfg llm.Config) (llm.Provider, error) {
			return New(Options{APIKey: cfg.APIKey, BaseURL: cfg.BaseURL}), nil
		},
		Prefixes:      []string{"gemini"},
		ContextWindow: func(model string) int { return Capabilities(model).ContextWindow },
		Known:         llm.InCatalog,
		Capabilities:  Capabilities,
	})
}

// Capabilities is what a Gemini model can do, by family, as Google
// documents it: from 1.5 on a model calls functions, takes a response
// schema, streams and takes images, with a window of 1M tokens (2M for
// 1.5 Pro and 2.0 Pro); Gemini 1.0 Pro takes no images and no schema in a
// window of 32k, 1.0 Pro Vision takes images but calls no functions. A
// speech, image-making, live or embedding model, or a name of no family,
// is unknown.
func Capabilities(model string) llm.Capabilities {
	m := strings.TrimPrefix(model, "models/")
	for _, special := range []string{"-tts", "-image", "-live", "native-audio", "embedding"} {
		if strings.Contains(m, special) {
			return llm.Capabilities{Unknown: true}
		}
	}
	modern := llm.Capabilities{Tools: true, StructuredOutput: true, Streaming: true, Vision: true, ContextWindow: 1_048_576}
	switch {
	case m == "gemini-pro-vision", strings.HasPrefix(m, "gemini-1.0-pro-vision"):
		return llm.Capabilities{Streaming: true, Vision: true, ContextWindow: 16_384}
	case m == "gemini-pro", strings.HasPrefix(m, "gemini-1.0-pro"):
		return llm.Capabilities{Tools: true, Streaming: true, ContextWindow: 32_760}
	case strings.HasPrefix(m, "gemini-1.5-pro"), strings.HasPrefix(m, "gemini-2.0-pro"):
		modern.ContextWindow = 2_097_152
		return modern
	case strings.HasPrefix(m, "gemini-1.5-"), strings.HasPrefix(m, "gemini-2.0-"), strings.HasPrefix(m, "gemini-2.5-"),
		strings.HasPrefix(m, "gemini-3-"), strings.HasPrefix(m, "gemini-3."):
		return modern
	}
	return llm.Capabilities{Unknown: true}
}

// Ready reports what keeps the provider from making calls (no API key),
// before any: an agent refuses to start a run on it.
func (p *Provider) Ready() error { return p.ready("") }

func (p *Provider) ready(model string) error {
	if p.err == nil {
		return nil
	}
	return &llm.APIError{Kind: llm.KindAuth, Provider: "gemini", Model: model, Message: p.err.Error()}
}

// Generate makes one generateContent call.
func (p *Provider) Generate(ctx context.Context, req *llm.Request) (*llm.Response, error) {
	if err := p.ready(req.Model); err != nil {
		return nil, err
	}
	contents, cfg, err := translate(req)
	if err != nil {
		return nil, err
	}
	r, err := p.client.Models.GenerateContent(ctx, req.Model, contents, cfg)
	if err != nil {
		return nil, apiError(ctx, req.Model, err)
	}
	resp := &llm.Response{Model: r.ModelVersion}
	var b builder
	if err := b.add(r, req.Model); err != nil {
		return nil, err
	}
	b.fill(resp)
	if resp.Content == "" && len(resp.ToolCalls) == 0 && blocked(resp.FinishReason) {
		return nil, &llm.APIError{Kind: llm.KindContentFiltered, Provider: "gemini", Model: req.Model,
			Message: "the reply was blocked (" + resp.FinishReason + ")"}
	}
	return resp, nil
}

// Stream makes one streamGenerateContent call. Gemini sends whole function
// calls, not fragments; each becomes one tool-call chunk.
func (p *Provider) Stream(ctx context.Context, req *llm.Request) iter.Seq2[llm.Chunk, error] {
	return func(yield func(llm.Chunk, error) bool) {
		if err := p.ready(req.Model); err != nil {
			yield(llm.Chunk{}, err)
			return
		}
		contents, cfg, err := translate(req)
		if err != nil {
			yield(llm.Chunk{}, err)
			return
		}
		calls, finished := 0, false
		for r, err := range p.client.Models.GenerateContentStream(ctx, req.Model, contents, cfg) {
			if err != nil {
				yield(llm.Chunk{}, llm.StreamError(apiError(ctx, req.Model, err)))
				return
			}
			var c llm.Chunk
			if len(r.Candidates) > 0 && r.Candidates[0].Content != nil {
				for _, part := range r.Candidates[0].Content.Parts {
					switch {
					case part.Thought:
					case part.FunctionCall != nil:
						args, _ := json.Marshal(part.FunctionCall.Args)
						if part.FunctionCall.Args == nil {
							args = []byte("{}")
						}
						d := &llm.ToolCallDelta{Index: calls, ID: callID(part.FunctionCall.ID, calls), Name: part.FunctionCall.Name,
							Arguments: string(args), Signature: part.ThoughtSignature}
						calls++
						if !yield(llm.Chunk{ToolCall: d}, nil) {
							return
						}
					case part.Text != "":
						if !yield(llm.Chunk{Text: part.Text}, nil) {
							return
						}
					}
				}
			}
			if len(r.Candidates) > 0 && r.Candidates[0].FinishReason != "" {
				finished = true
				c.FinishReason = string(r.Candidates[0].FinishReason)
			}
			if r.UsageMetadata != nil {
				u := usage(r.UsageMetadata)
				c.Usage = &u
			}
			c.Model = r.ModelVersion
			if c.FinishReason != "" || c.Usage != nil {
				if !yield(c, nil) {
					return
				}
			}
		}
		if !finished {
			yield(llm.Chunk{}, &llm.APIError{Kind: llm.KindTransient, Provider: "gemini", Model: req.Model,
				Message: "the stream ended before the model finished"})
		}
	}
}

// builder gathers a reply's parts.
type builder struct {
	text   strings.Builder
	calls  []llm.ToolCall
	finish string
	usage  llm.Usage
}

func (b *builder) add(r *genai.GenerateContentResponse, model string) error {
	if r.UsageMetadata != nil {
		b.usage = usage(r.UsageMetadata)
	}
	if len(r.Candidates) == 0 {
		if r.PromptFeedback != nil && r.PromptFeedback.BlockReason != "" {
			return &llm.APIError{Kind: llm.KindContentFiltered, Provider: "gemini", Model: model,
				Message: "the prompt was blocked (" + string(r.PromptFeedback.BlockReason) + ")"}
		}
		return &llm.APIError{Kind: llm.KindTransient, Provider: "gemini", Model: model, Message: "the response has no candidates"}
	}
	c := r.Candidates[0]
	b.finish = string(c.FinishReason)
	if c.Content == nil {
		return nil
	}
	for _, part := range c.Content.Parts {
		switch {
		case part.Thought:
		case part.FunctionCall != nil:
			args := []byte("{}")
			if part.FunctionCall.Args != nil {
				args, _ = json.Marshal(part.FunctionCall.Args)
			}
			b.calls = append(b.calls, llm.ToolCall{ID: callID(part.FunctionCall.ID, len(b.calls)), Name: part.FunctionCall.Name,
				Arguments: args, Signature: part.ThoughtSignature})
		default:
			b.text.WriteString(part.Text)
		}
	}
	return nil
}

func (b *builder) fill(r *llm.Response) {
	r.Content, r.ToolCalls, r.FinishReason, r.Usage = b.text.String(), b.calls, b.finish, b.usage
}

// callID keeps Gemini's id when it sends one and makes one otherwise: the
// transcript needs an id to pair results with calls.
func callID(id string, i int) string {
	if id != "" {
		return id
	}
	return "call_" + strconv.Itoa(i+1)
}

func blocked(reason string) bool {
	switch reason {
	case "SAFETY", "PROHIBITED_CONTENT", "BLOCKLIST", "SPII", "RECITATION", "IMAGE_SAFETY":
		return true
	}
	return false
}

// usage counts thinking tokens as completion tokens, as they are billed.
func usage(m *genai.GenerateContentResponseUsageMetadata) llm.Usage {
	u := llm.Usage{PromptTokens: int(m.PromptTokenCount) + int(m.ToolUsePromptTokenCount),
		CompletionTokens: int(m.CandidatesTokenCount) + int(m.ThoughtsTokenCount), CachedPromptTokens: int(m.CachedContentTokenCount)}
	u.TotalTokens = u.PromptTokens + u.CompletionTokens
	if t := int(m.TotalTokenCount); t > u.TotalTokens {
		u.TotalTokens = t
	}
	return u
}

// translate turns a request into contents and a config: system messages
// become the system instruction; tool results are function responses in
// the user turn after the model's calls.
func translate(req *llm.Request) ([]*genai.Content, *genai.GenerateContentConfig, error) {
	bad := func(format string, a ...any) error {
		return &llm.APIError{Kind: llm.KindInvalidRequest, Provider: "gemini", Model: req.Model, Message: fmt.Sprintf(format, a...)}
	}
	cfg := &genai.GenerateContentConfig{}
	var contents []*genai.Content
	add := func(role string, parts ...*genai.Part) {
		if n := len(contents); n > 0 && contents[n-1].Role == role {
			contents[n-1].Parts = append(contents[n-1].Parts, parts...)
			return
		}
		contents = append(contents, &genai.Content{Role: role, Parts: parts})
	}
	var system []*genai.Part
	for i, m := range req.Messages {
		switch m.Role {
		case llm.RoleSystem, llm.RoleDeveloper:
			system = append(system, &genai.Part{Text: m.Content})
		case llm.RoleUser:
			parts := make([]*genai.Part, 0, len(m.Images())+1)
			if m.Content != "" || len(m.Images()) == 0 {
				parts = append(parts, &genai.Part{Text: m.Content})
			}
			for _, im := range m.Images() {
				if im.URL != "" {
					parts = append(parts, &genai.Part{FileData: &genai.FileData{FileURI: im.URL, MIMEType: imageType(im)}})
				} else {
					parts = append(parts, &genai.Part{InlineData: &genai.Blob{Data: im.Data, MIMEType: im.MIMEType}})
				}
			}
			add(genai.RoleUser, parts...)
		case llm.RoleAssistant:
			var parts []*genai.Part
			if m.Content != "" {
				parts = append(parts, &genai.Part{Text: m.Content})
			}
			for _, tc := range m.ToolCalls {
				var args map[string]any
				if err := json.Unmarshal(tc.Arguments, &args); err != nil {
					args = map[string]any{}
				}
				parts = append(parts, &genai.Part{FunctionCall: &genai.FunctionCall{ID: tc.ID, Name: tc.Name, Args: args}, ThoughtSignature: tc.Signature})
			}
			if len(parts) > 0 {
				add(genai.RoleModel, parts...)
			}
		case llm.RoleTool:
			if m.Name == "" {
				return nil, nil, bad("message %d: tool message without the tool's name", i)
			}
			add(genai.RoleUser, &genai.Part{FunctionResponse: &genai.FunctionResponse{ID: m.ToolCallID, Name: m.Name, Response: toolResponse(m.Content)}})
		default:
			return nil, nil, bad("message %d: unknown role %q", i, m.Role)
		}
	}
	if len(system) > 0 {
		cfg.SystemInstruction = &genai.Content{Parts: system}
	}
	if err := configure(cfg, req); err != nil {
		return nil, nil, err
	}
	return contents, cfg, nil
}

// configure sets the tools, tool choice, response schema and sampling of
// a request.
func configure(cfg *genai.GenerateContentConfig, req *llm.Request) error {
	bad := func(format string, a ...any) error {
		return &llm.APIError{Kind: llm.KindInvalidRequest, Provider: "gemini", Model: req.Model, Message: fmt.Sprintf(format, a...)}
	}
	if len(req.Tools) > 0 {
		t := &genai.Tool{}
		for _, ts := range req.Tools {
			s, err := schema.Object(ts.Parameters)
			if err != nil {
				return bad("tool %s: %v", ts.Name, err)
			}
			t.FunctionDeclarations = append(t.FunctionDeclarations, &genai.FunctionDeclaration{Name: ts.Name, Description: ts.Description, ParametersJsonSchema: s})
		}
		cfg.Tools = []*genai.Tool{t}
	}
	switch tc := req.ToolChoice; tc {
	case "", "auto":
	case "none":
		cfg.ToolConfig = &genai.ToolConfig{FunctionCallingConfig: &genai.FunctionCallingConfig{Mode: genai.FunctionCallingConfigModeNone}}
	case "required":
		cfg.ToolConfig = &genai.ToolConfig{FunctionCallingConfig: &genai.FunctionCallingConfig{Mode: genai.FunctionCallingConfigModeAny}}
	default:
		cfg.ToolConfig = &genai.ToolConfig{FunctionCallingConfig: &genai.FunctionCallingConfig{Mode: genai.FunctionCallingConfigModeAny, AllowedFunctionNames: []string{tc}}}
	}
	if len(req.ResponseSchema) > 0 {
		s, err := schema.Object(req.ResponseSchema)
		if err != nil {
			return bad("response schema: %v", err)
		}
		cfg.ResponseMIMEType = "application/json"
		cfg.ResponseJsonSchema = s
	}
	if req.Temperature != nil {
		v := float32(*req.Temperature)
		cfg.Temperature = &v
	}
	if req.TopP != nil {
		v := float32(*req.TopP)
		cfg.TopP = &v
	}
	if req.MaxOutputTokens > 0 {
		cfg.MaxOutputTokens = int32(req.MaxOutputTokens)
	}
	cfg.StopSequences = req.Stop
	return nil
}

// toolResponse wraps a tool's observation as the object Gemini expects:
// a failure under "error", any other value under "output".
func toolResponse(content string) map[string]any {
	var v any
	if err := json.Unmarshal([]byte(content), &v); err != nil {
		return map[string]any{"output": content}
	}
	if m, ok := v.(map[string]any); ok && m["status"] == "error" {
		return map[string]any{"error": m["error"]}
	}
	return map[string]any{"output": v}
}

// apiError maps the SDK's error, reading Google's RetryInfo for the wait.
func apiError(ctx context.Context, model string, err error) error {
	if ctx.Err() != nil {
		return ctx.Err()
	}
	var ge genai.APIError
	if !errors.As(err, &ge) {
		var gp *genai.APIError
		if !errors.As(err, &gp) {
			return llm.TransportError("gemini", model, err)
		}
		ge = *gp
	}
	e := &llm.APIError{Kind: llm.KindForStatus(ge.Code), Provider: "gemini", Model: model, Status: ge.Code, Message: ge.Message}
	if ge.Status != "" && !strings.Contains(e.Message, ge.Status) {
		e.Message += " (" + ge.Status + ")"
	}
	for _, d := range ge.Details {
		if s, ok := d["retryDelay"].(string); ok {
			if w, err := time.ParseDuration(s); err == nil {
				e.RetryAfter = w
			}
		}
	}
	switch {
	case ge.Status == "RESOURCE_EXHAUSTED":
		e.Kind = llm.KindRateLimited
	case ge.Status == "UNAVAILABLE":
		e.Kind = llm.KindOverloaded
	case strings.Contains(ge.Message, "exceeds the maximum number of tokens") || strings.Contains(ge.Message, "input token count"):
		e.Kind = llm.KindContextTooLong
	}
	return e
}

// imageType is an image's MIME type: the one given, else its URL's
// extension's, else JPEG (Gemini wants one with a file URI).
func imageType(im llm.Image) string {
	if im.MIMEType != "" {
		return im.MIMEType
	}
	if t := mime.TypeByExtension(path.Ext(im.URL)); strings.HasPrefix(t, "image/") {
		return t
	}
	return "image/jpeg"
}
