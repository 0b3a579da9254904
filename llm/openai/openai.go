// Package openai is the provider for OpenAI's Chat Completions API and the
// servers that speak it (Ollama, vLLM, llama.cpp's server, OpenRouter,
// Azure OpenAI), built on the official SDK github.com/openai/openai-go/v3.
//
// Importing the package registers the providers "openai" (OPENAI_API_KEY,
// OPENAI_BASE_URL), "azure" (AZURE_OPENAI_ENDPOINT, AZURE_OPENAI_API_KEY),
// "ollama" (OLLAMA_HOST or http://localhost:11434) and "openrouter"
// (OPENROUTER_API_KEY) with llm.Open.
package openai

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"iter"
	"net"
	"net/http"
	"net/url"
	"os"
	"strings"

	sdk "github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/packages/param"
	"github.com/openai/openai-go/v3/shared"

	"github.com/agentry/agentry/llm"
	"github.com/agentry/agentry/schema"
)

// Options configure a Provider. The zero value talks to api.openai.com
// with OPENAI_API_KEY.
type Options struct {
	// Name is the provider's name in results and errors; default "openai".
	Name string
	// APIKey overrides the environment's key.
	APIKey string
	// BaseURL points the client at another OpenAI-compatible server.
	BaseURL string
	// HTTPClient replaces the default HTTP client.
	HTTPClient *http.Client
	// NoKey allows calls without an API key (local servers).
	NoKey bool
	// Compatible marks a server that is not OpenAI's: it gets max_tokens
	// unless the model is a reasoning model.
	Compatible bool
	// AzureAPIVersion, when set, makes BaseURL an Azure OpenAI endpoint:
	// the model is the deployment, and APIKey goes in the api-key header.
	AzureAPIVersion string
}

// Provider calls the Chat Completions API. It is safe for concurrent use.
type Provider struct {
	// client is the one service agentry calls. A whole sdk.Client would
	// link every service of the API into the binary: some 16 MB of code
	// and types, resident in every process that serves agents.
	client sdk.ChatCompletionService
	name   string
	hasKey bool
	compat bool
	// azure is the Azure endpoint: each call goes to its deployment.
	azure string
}

// New returns a provider. Retries are left to llm.Retry: the SDK's own
// are turned off so that a call is never retried twice over.
func New(o Options) *Provider {
	name := o.Name
	if name == "" {
		name = "openai"
	}
	opts := []option.RequestOption{option.WithMaxRetries(0), option.WithMiddleware(traceContext)}
	key := o.APIKey
	if key == "" && o.AzureAPIVersion == "" {
		key = os.Getenv("OPENAI_API_KEY")
	}
	if key == "" && o.NoKey {
		key = "none" // the SDK wants one; local servers ignore it
	}
	var azureEndpoint string
	switch {
	case o.AzureAPIVersion != "":
		// Azure OpenAI is the same wire format at another address: the
		// deployment in the path (set per call), the version in the query,
		// the key in an api-key header, and nothing of OpenAI's own
		// credentials, which the SDK would take from the environment.
		azureEndpoint = strings.TrimSuffix(o.BaseURL, "/")
		opts = append(opts, option.WithBaseURL(azureEndpoint+"/openai/"),
			option.WithQueryAdd("api-version", o.AzureAPIVersion), option.WithMiddleware(azureHeaders(key)))
	default:
		if key != "" {
			opts = append(opts, option.WithAPIKey(key))
		}
		if o.BaseURL != "" {
			opts = append(opts, option.WithBaseURL(o.BaseURL))
		}
	}
	if o.HTTPClient != nil {
		opts = append(opts, option.WithHTTPClient(o.HTTPClient))
	}
	// DefaultClientOptions first, as sdk.NewClient puts them.
	client := sdk.NewChatCompletionService(append(sdk.DefaultClientOptions(), opts...)...)
	return &Provider{client: client, name: name, hasKey: key != "", compat: o.Compatible, azure: azureEndpoint}
}

// traceContext sends the run's trace context (llm.WithTraceContext).
func traceContext(r *http.Request, next option.MiddlewareNext) (*http.Response, error) {
	llm.SetTraceHeaders(r.Context(), r.Header)
	return next(r)
}

// azureHeaders sends key as Azure's api-key header and drops OpenAI's
// authorization, organization and project headers.
func azureHeaders(key string) option.Middleware {
	return func(r *http.Request, next option.MiddlewareNext) (*http.Response, error) {
		r.Header.Del("Authorization")
		r.Header.Del("OpenAI-Organization")
		r.Header.Del("OpenAI-Project")
		if key != "" {
			r.Header.Set("Api-Key", key)
		}
		return next(r)
	}
}

// callOptions route a call to its Azure deployment; none for OpenAI.
func (p *Provider) callOptions(model string) []option.RequestOption {
	if p.azure == "" {
		return nil
	}
	return []option.RequestOption{option.WithBaseURL(p.azure + "/openai/deployments/" + url.PathEscape(model) + "/")}
}

// ownServer says whether base, OPENAI_BASE_URL, points at a server other
// than OpenAI's: one that speaks its API (vLLM, llama.cpp, a proxy).
func ownServer(base string) bool { return base != "" && !strings.Contains(base, "api.openai.com") }

func init() {
	llm.Register("openai", llm.Driver{
		Open: func(model string, cfg llm.Config) (llm.Provider, error) {
			compat := cfg.BaseURL != "" || ownServer(os.Getenv("OPENAI_BASE_URL"))
			return New(Options{APIKey: cfg.APIKey, BaseURL: cfg.BaseURL, Compatible: compat}), nil
		},
		Prefixes:      []string{"gpt-", "ft:", "chatgpt-", "o1", "o3", "o4"},
		ContextWindow: ContextWindow,
		// A fine-tuned id, and any model of a server of one's own
		// (OPENAI_BASE_URL at another host), is not OpenAI's catalog's.
		Known: func(model string) bool {
			return strings.HasPrefix(model, "ft:") || llm.InCatalog(model) || ownServer(os.Getenv("OPENAI_BASE_URL"))
		},
		Capabilities: Capabilities,
	})
	// An Azure deployment is named by its owner, often after its OpenAI
	// model: such a name gets that model's capabilities, any other none.
	llm.Register("azure", llm.Driver{
		Open:          openAzure,
		ContextWindow: func(deployment string) int { return ContextWindow(azureModel(deployment)) },
		Capabilities:  func(deployment string) llm.Capabilities { return Capabilities(azureModel(deployment)) },
	})
	// Ollama and OpenRouter serve models agentry has no table of: what
	// they can do is unknown, not everything.
	llm.Register("ollama", llm.Driver{Capabilities: unknown, Open: func(model string, cfg llm.Config) (llm.Provider, error) {
		base := cfg.BaseURL
		if base == "" {
			base = ollamaBase(os.Getenv("OLLAMA_HOST"))
		}
		return New(Options{Name: "ollama", APIKey: cfg.APIKey, BaseURL: base, NoKey: true, Compatible: true}), nil
	}})
	llm.Register("openrouter", llm.Driver{Capabilities: unknown, Open: func(model string, cfg llm.Config) (llm.Provider, error) {
		base, key := cfg.BaseURL, cfg.APIKey
		if base == "" {
			base = "https://openrouter.ai/api/v1"
		}
		if key == "" {
			key = os.Getenv("OPENROUTER_API_KEY")
		}
		return New(Options{Name: "openrouter", APIKey: key, BaseURL: base, Compatible: true}), nil
	}})
}

// openAzure opens an Azure OpenAI deployment.
func openAzure(_ string, cfg llm.Config) (llm.Provider, error) {
	endpoint, key := cfg.BaseURL, cfg.APIKey
	if endpoint == "" {
		endpoint = os.Getenv("AZURE_OPENAI_ENDPOINT")
	}
	if endpoint == "" {
		return nil, errors.New("azure: set AZURE_OPENAI_ENDPOINT or the spec's base_url to https://RESOURCE.openai.azure.com")
	}
	if u, err := url.Parse(endpoint); err != nil || u.Scheme != "https" && !loopbackHTTP(endpoint) {
		return nil, fmt.Errorf("azure: endpoint %q must be an https URL (plain http only to a loopback proxy): the key would travel in the clear", endpoint)
	}
	if key == "" {
		key = os.Getenv("AZURE_OPENAI_API_KEY")
	}
	version := os.Getenv("AZURE_OPENAI_API_VERSION")
	if version == "" {
		version = DefaultAzureAPIVersion
	}
	return New(Options{Name: "azure", APIKey: key, BaseURL: endpoint, AzureAPIVersion: version}), nil
}

// ContextWindow is the context window of an OpenAI model (or of an Azure
// deployment named after one) as OpenAI publishes it, 0 when unknown.
func ContextWindow(model string) int {
	m := strings.TrimPrefix(model, "ft:")
	switch {
	case strings.HasPrefix(m, "gpt-4.1"):
		return 1_047_576
	case strings.HasPrefix(m, "gpt-5"):
		return 400_000
	case strings.HasPrefix(m, "o3"), strings.HasPrefix(m, "o4"), strings.HasPrefix(m, "o1"):
		return 200_000
	case strings.HasPrefix(m, "gpt-4o"):
		return 128_000
	}
	return 0
}

// Capabilities is what an OpenAI model (or an Azure deployment named
// after one) can do, as OpenAI documents it: the o1-mini and o1-preview
// reasoning models call no tools and take no schema, GPT-3.5 and GPT-4
// Turbo take no JSON schema, the 4o, 4.1, 5 and o-series models (bar
// o1-mini, o1-preview and o3-mini) take images. A name of no OpenAI
// family (a model of another OpenAI-compatible server) is unknown.
func Capabilities(model string) llm.Capabilities {
	m := strings.TrimPrefix(model, "ft:")
	hasAny := func(prefixes ...string) bool {
		for _, p := range prefixes {
			if strings.HasPrefix(m, p) {
				return true
			}
		}
		return false
	}
	if !hasAny("gpt-3.5", "gpt-4", "gpt-5", "chatgpt-4o", "o1", "o3", "o4") {
		return llm.Capabilities{Unknown: true}
	}
	c := llm.Capabilities{Tools: true, StructuredOutput: true, Streaming: true}
	switch {
	case hasAny("o1-mini", "o1-preview"):
		c.Tools, c.StructuredOutput = false, false
	case hasAny("gpt-3.5", "gpt-4-"), m == "gpt-4":
		c.StructuredOutput = false
	}
	c.Vision = hasAny("gpt-4o", "chatgpt-4o", "gpt-4.1", "gpt-5", "gpt-4-turbo", "o1", "o3", "o4") && !hasAny("o1-mini", "o1-preview", "o3-mini")
	return c
}

// azureModel is the OpenAI model an Azure deployment name stands for:
// Azure spells GPT-3.5 "gpt-35".
func azureModel(deployment string) string {
	if rest, ok := strings.CutPrefix(deployment, "gpt-35"); ok {
		return "gpt-3.5" + rest
	}
	return deployment
}

// unknown is the capabilities of a model the provider keeps no table of.
func unknown(string) llm.Capabilities { return llm.Capabilities{Unknown: true} }

func loopbackHTTP(base string) bool {
	u, err := url.Parse(base)
	if err != nil || u.Scheme != "http" {
		return false
	}
	h := u.Hostname()
	ip := net.ParseIP(h)
	return h == "localhost" || ip != nil && ip.IsLoopback()
}

// DefaultAzureAPIVersion is the Azure OpenAI API version used unless
// AZURE_OPENAI_API_VERSION says otherwise.
const DefaultAzureAPIVersion = "2024-10-21"

// ollamaBase turns OLLAMA_HOST ("host:port", "http://host:port" or empty)
// into the address of Ollama's OpenAI-compatible API.
func ollamaBase(host string) string {
	if host == "" {
		return "http://localhost:11434/v1"
	}
	if !strings.Contains(host, "://") {
		host = "http://" + host
	}
	return strings.TrimSuffix(host, "/") + "/v1"
}

// IsReasoningModel reports whether model takes max_completion_tokens and no
// sampling parameters: the o-series and gpt-5 families.
func IsReasoningModel(model string) bool {
	m := strings.TrimPrefix(model, "ft:")
	return strings.HasPrefix(m, "o1") || strings.HasPrefix(m, "o3") || strings.HasPrefix(m, "o4") ||
		strings.HasPrefix(m, "gpt-5")
}

// Generate makes one Chat Completions call.
func (p *Provider) Generate(ctx context.Context, req *llm.Request) (*llm.Response, error) {
	params, err := p.params(req)
	if err != nil {
		return nil, err
	}
	if err := p.checkKey(req.Model); err != nil {
		return nil, err
	}
	cc, err := p.client.New(ctx, params, p.callOptions(req.Model)...)
	if err != nil {
		return nil, p.apiError(ctx, req.Model, err)
	}
	if len(cc.Choices) == 0 {
		return nil, &llm.APIError{Kind: llm.KindTransient, Provider: p.name, Model: req.Model, Message: "the response has no choices"}
	}
	ch := cc.Choices[0]
	resp := &llm.Response{Content: ch.Message.Content, Model: cc.Model, FinishReason: ch.FinishReason, Usage: usage(cc.Usage)}
	if resp.Content == "" && ch.Message.Refusal != "" {
		resp.Content = ch.Message.Refusal
	}
	for _, tc := range ch.Message.ToolCalls {
		if tc.Type != "" && tc.Type != "function" {
			continue
		}
		args := tc.Function.Arguments
		if strings.TrimSpace(args) == "" {
			args = "{}"
		}
		resp.ToolCalls = append(resp.ToolCalls, llm.ToolCall{ID: tc.ID, Name: tc.Function.Name, Arguments: json.RawMessage(args)})
	}
	if ch.FinishReason == "content_filter" && resp.Content == "" && len(resp.ToolCalls) == 0 {
		return nil, &llm.APIError{Kind: llm.KindContentFiltered, Provider: p.name, Model: req.Model, Message: "the reply was withheld by the content filter"}
	}
	return resp, nil
}

// Stream makes one streamed Chat Completions call. Tool-call arguments
// arrive in pieces and are assembled by llm.Collect; usage comes last. A
// stream that ends before the model finished is a transient error.
func (p *Provider) Stream(ctx context.Context, req *llm.Request) iter.Seq2[llm.Chunk, error] {
	return func(yield func(llm.Chunk, error) bool) {
		params, err := p.params(req)
		if err == nil {
			err = p.checkKey(req.Model)
		}
		if err != nil {
			yield(llm.Chunk{}, err)
			return
		}
		params.StreamOptions = sdk.ChatCompletionStreamOptionsParam{IncludeUsage: param.NewOpt(true)}
		stream := p.client.NewStreaming(ctx, params, p.callOptions(req.Model)...)
		defer stream.Close()
		finished := false
		for stream.Next() {
			c := stream.Current()
			if c.JSON.Usage.Valid() && (c.Usage.PromptTokens > 0 || c.Usage.CompletionTokens > 0) {
				u := usage(c.Usage)
				if !yield(llm.Chunk{Usage: &u, Model: c.Model}, nil) {
					return
				}
			}
			for _, ch := range c.Choices {
				if ch.Index != 0 {
					continue
				}
				if ch.Delta.Content != "" {
					if !yield(llm.Chunk{Text: ch.Delta.Content}, nil) {
						return
					}
				}
				for _, tc := range ch.Delta.ToolCalls {
					d := &llm.ToolCallDelta{Index: int(tc.Index), ID: tc.ID, Name: tc.Function.Name, Arguments: tc.Function.Arguments}
					if !yield(llm.Chunk{ToolCall: d}, nil) {
						return
					}
				}
				if ch.FinishReason != "" {
					finished = true
					if !yield(llm.Chunk{FinishReason: ch.FinishReason, Model: c.Model}, nil) {
						return
					}
				}
			}
		}
		if err := stream.Err(); err != nil {
			yield(llm.Chunk{}, llm.StreamError(p.apiError(ctx, req.Model, err)))
			return
		}
		if !finished {
			yield(llm.Chunk{}, &llm.APIError{Kind: llm.KindTransient, Provider: p.name, Model: req.Model,
				Message: "the stream ended before the model finished"})
		}
	}
}

// Ready reports what keeps the provider from making calls (no API key),
// before any: an agent refuses to start a run on it.
func (p *Provider) Ready() error { return p.checkKey("") }

func (p *Provider) checkKey(model string) error {
	if p.hasKey {
		return nil
	}
	env := "OPENAI_API_KEY"
	switch p.name {
	case "azure":
		env = "AZURE_OPENAI_API_KEY"
	case "openrouter":
		env = "OPENROUTER_API_KEY"
	}
	return &llm.APIError{Kind: llm.KindAuth, Provider: p.name, Model: model, Message: "no API key: set " + env}
}

func usage(u sdk.CompletionUsage) llm.Usage {
	return llm.Usage{PromptTokens: int(u.PromptTokens), CompletionTokens: int(u.CompletionTokens),
		TotalTokens: int(u.TotalTokens), CachedPromptTokens: int(u.PromptTokensDetails.CachedTokens)}
}

// params translates a request into the SDK's parameters.
func (p *Provider) params(req *llm.Request) (sdk.ChatCompletionNewParams, error) {
	reasoning := IsReasoningModel(req.Model)
	out := sdk.ChatCompletionNewParams{Model: shared.ChatModel(req.Model)}
	for i, m := range req.Messages {
		mp, err := message(m, reasoning && !p.compat)
		if err != nil {
			return out, &llm.APIError{Kind: llm.KindInvalidRequest, Provider: p.name, Model: req.Model,
				Message: fmt.Sprintf("message %d: %v", i, err)}
		}
		out.Messages = append(out.Messages, mp)
	}
	for _, t := range req.Tools {
		params, err := schema.Object(t.Parameters)
		if err != nil {
			return out, &llm.APIError{Kind: llm.KindInvalidRequest, Provider: p.name, Model: req.Model,
				Message: fmt.Sprintf("tool %s: parameters: %v", t.Name, err)}
		}
		fd := shared.FunctionDefinitionParam{Name: t.Name, Parameters: shared.FunctionParameters(params)}
		if t.Description != "" {
			fd.Description = param.NewOpt(t.Description)
		}
		if strictCompatible(params) {
			fd.Strict = param.NewOpt(true)
		}
		out.Tools = append(out.Tools, sdk.ChatCompletionFunctionTool(fd))
	}
	switch tc := req.ToolChoice; tc {
	case "":
	case "auto", "none", "required":
		out.ToolChoice = sdk.ChatCompletionToolChoiceOptionUnionParam{OfAuto: param.NewOpt(tc)}
	default:
		out.ToolChoice = sdk.ToolChoiceOptionFunctionToolChoice(sdk.ChatCompletionNamedToolChoiceFunctionParam{Name: tc})
	}
	if len(req.ResponseSchema) > 0 {
		s, err := schema.Object(req.ResponseSchema)
		if err != nil {
			return out, &llm.APIError{Kind: llm.KindInvalidRequest, Provider: p.name, Model: req.Model,
				Message: fmt.Sprintf("response schema: %v", err)}
		}
		js := shared.ResponseFormatJSONSchemaJSONSchemaParam{Name: "output", Schema: s}
		if strictCompatible(s) {
			js.Strict = param.NewOpt(true)
		}
		out.ResponseFormat = sdk.ChatCompletionNewParamsResponseFormatUnion{OfJSONSchema: &shared.ResponseFormatJSONSchemaParam{JSONSchema: js}}
	}
	if !reasoning {
		if req.Temperature != nil {
			out.Temperature = param.NewOpt(*req.Temperature)
		}
		if req.TopP != nil {
			out.TopP = param.NewOpt(*req.TopP)
		}
	}
	if len(req.Stop) > 0 && !reasoning {
		out.Stop = sdk.ChatCompletionNewParamsStopUnion{OfStringArray: req.Stop}
	}
	if req.MaxOutputTokens > 0 {
		if reasoning || !p.compat {
			out.MaxCompletionTokens = param.NewOpt(int64(req.MaxOutputTokens))
		} else {
			out.MaxTokens = param.NewOpt(int64(req.MaxOutputTokens))
		}
	}
	return out, nil
}

func message(m llm.Message, developer bool) (sdk.ChatCompletionMessageParamUnion, error) {
	switch m.Role {
	case llm.RoleSystem:
		if developer {
			return sdk.DeveloperMessage(m.Content), nil
		}
		return sdk.SystemMessage(m.Content), nil
	case llm.RoleDeveloper:
		return sdk.DeveloperMessage(m.Content), nil
	case llm.RoleUser:
		if imgs := m.Images(); len(imgs) > 0 {
			parts := make([]sdk.ChatCompletionContentPartUnionParam, 0, len(imgs)+1)
			if m.Content != "" {
				parts = append(parts, sdk.TextContentPart(m.Content))
			}
			for _, im := range imgs {
				parts = append(parts, sdk.ImageContentPart(sdk.ChatCompletionContentPartImageImageURLParam{URL: imageURL(im)}))
			}
			return sdk.UserMessage(parts), nil
		}
		return sdk.UserMessage(m.Content), nil
	case llm.RoleTool:
		if m.ToolCallID == "" {
			return sdk.ChatCompletionMessageParamUnion{}, errors.New("tool message without tool_call_id")
		}
		return sdk.ToolMessage(m.Content, m.ToolCallID), nil
	case llm.RoleAssistant:
		a := sdk.ChatCompletionAssistantMessageParam{}
		if m.Content != "" {
			a.Content = sdk.ChatCompletionAssistantMessageParamContentUnion{OfString: param.NewOpt(m.Content)}
		}
		for _, tc := range m.ToolCalls {
			a.ToolCalls = append(a.ToolCalls, sdk.ChatCompletionMessageToolCallUnionParam{
				OfFunction: &sdk.ChatCompletionMessageFunctionToolCallParam{ID: tc.ID,
					Function: sdk.ChatCompletionMessageFunctionToolCallFunctionParam{Name: tc.Name, Arguments: string(tc.Arguments)}},
			})
		}
		return sdk.ChatCompletionMessageParamUnion{OfAssistant: &a}, nil
	}
	return sdk.ChatCompletionMessageParamUnion{}, fmt.Errorf("unknown role %q", m.Role)
}

// imageURL is an image as OpenAI takes it: its URL, or its bytes as a
// data URL.
func imageURL(im llm.Image) string {
	if im.URL != "" {
		return im.URL
	}
	return "data:" + im.MIMEType + ";base64," + base64.StdEncoding.EncodeToString(im.Data)
}

// strictCompatible reports whether a schema meets the rules of OpenAI's
// strict mode: every object lists all its properties as required and
// allows no others. Strict mode is asked for only then, so that any other
// schema still works.
func strictCompatible(s any) bool {
	switch v := s.(type) {
	case map[string]any:
		if props, ok := v["properties"].(map[string]any); ok || v["type"] == "object" {
			if v["additionalProperties"] != false {
				return false
			}
			req, _ := v["required"].([]any)
			if len(req) != len(props) {
				return false
			}
		}
		for k, x := range v {
			if k == "enum" || k == "const" || k == "default" || k == "examples" {
				continue
			}
			if !strictCompatible(x) {
				return false
			}
		}
	case []any:
		for _, x := range v {
			if !strictCompatible(x) {
				return false
			}
		}
	}
	return true
}
