// Command mcpconformance is agentry's MCP client as the official MCP
// conformance suite drives it in client mode: the suite starts it once
// per scenario with the server's URL, and it runs an agentry agent whose
// tools are that server's (mcp:conformance/*), through tool/mcp as any
// agent would. Its model calls each tool the server lists once, then
// answers.
//
//	conformance client --command ".../mcpconformance" --scenario tools_call
package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/oauthex"

	"github.com/agentry/agentry/agent"
	"github.com/agentry/agentry/llm"
	"github.com/agentry/agentry/spec"
	"github.com/agentry/agentry/tool"
	"github.com/agentry/agentry/tool/mcp"
)

// arguments are what the model passes the tools the scenarios expect to
// be called with particular values; any other tool gets {}.
var arguments = map[string]string{
	"add_numbers": `{"a": 5, "b": 3}`,
}

// caller is the model: it makes the calls the suite's context lists, in
// order, when it lists some; else it calls every tool it is offered; one
// call a turn; then it answers.
type caller struct {
	called map[string]bool
	script []scripted // from MCP_CONFORMANCE_CONTEXT's toolCalls
}

type scripted struct {
	Name      string          `json:"name"`
	Arguments json.RawMessage `json:"arguments"`
}

func (c *caller) Generate(_ context.Context, req *llm.Request) (*llm.Response, error) {
	if len(c.script) > 0 {
		call := c.script[0]
		c.script = c.script[1:]
		if len(call.Arguments) == 0 {
			call.Arguments = json.RawMessage("{}")
		}
		return &llm.Response{ToolCalls: []llm.ToolCall{{ID: fmt.Sprintf("call_%d", len(c.script)), Name: tool.NameFor(call.Name), Arguments: call.Arguments}}}, nil
	}
	if c.called["#script"] {
		return &llm.Response{Content: "done"}, nil
	}
	for _, t := range req.Tools {
		if c.called[t.Name] {
			continue
		}
		c.called[t.Name] = true
		args, ok := arguments[t.Name]
		switch {
		case t.Name == "json_schema_echo":
			// The schema the model was offered for another tool, sent
			// back: the suite checks it is the server's, unchanged.
			args = echo(req.Tools, "json_schema_2020_12_tool")
		case !ok:
			args = "{}"
		}
		return &llm.Response{ToolCalls: []llm.ToolCall{{ID: "call_" + t.Name, Name: t.Name, Arguments: json.RawMessage(args)}}}, nil
	}
	return &llm.Response{Content: "done"}, nil
}

// echo is the arguments {"schema": SCHEMA} with the parameters the model
// was offered for the tool called name.
func echo(tools []llm.ToolSpec, name string) string {
	for _, t := range tools {
		if t.Name == name {
			b, _ := json.Marshal(map[string]json.RawMessage{"schema": t.Parameters})
			return string(b)
		}
	}
	return "{}"
}

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: mcpconformance SERVER_URL (MCP_CONFORMANCE_SCENARIO names the scenario)")
		os.Exit(2)
	}
	if err := run(os.Args[1]); err != nil {
		fmt.Fprintf(os.Stderr, "scenario %s: %v\n", os.Getenv("MCP_CONFORMANCE_SCENARIO"), err)
		os.Exit(1)
	}
}

func run(server string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	sp := &spec.Spec{AgentName: "conformance", Version: "v1", SystemText: "Call the tools.",
		MCPServers: []spec.MCPServer{{Name: "conformance", URL: server, ConnectTimeoutMS: 20000}},
		Tools:      []string{"mcp:conformance/*"}, Limits: spec.Limits{MaxTurns: 50}}
	model := &caller{called: map[string]bool{}}
	var given struct {
		ToolCalls []scripted `json:"toolCalls"`
	}
	if json.Unmarshal([]byte(os.Getenv("MCP_CONFORMANCE_CONTEXT")), &given) == nil && len(given.ToolCalls) > 0 {
		model.script, model.called["#script"] = given.ToolCalls, true
	}
	opts := []agent.Option{agent.WithProvider(model, "conformance")}
	if strings.HasPrefix(os.Getenv("MCP_CONFORMANCE_SCENARIO"), "auth/") {
		h, err := oauth()
		if err != nil {
			return err
		}
		opts = append(opts, agent.WithSource("mcp", mcp.Source(func(spec.MCPServer) mcp.Options { return mcp.Options{OAuth: h} })))
	}
	a, err := agent.New(sp, opts...)
	if err != nil {
		return err
	}
	defer a.Close()
	res, err := a.Run(ctx, map[string]any{"task": "Call the tools."})
	if err != nil {
		return err
	}
	for _, s := range res.Steps {
		if s.Action != nil && s.Action.Error != "" {
			fmt.Fprintf(os.Stderr, "tool %s: %s\n", s.Action.Tool, s.Action.Error)
		}
	}
	return nil
}

// oauth is the SDK's authorization code handler as an unattended client
// uses it: the client registered by a metadata document, dynamically, or
// beforehand (the suite's context gives the credentials), and the
// authorization server's redirect followed without a browser.
func oauth() (*auth.AuthorizationCodeHandler, error) {
	cfg := &auth.AuthorizationCodeHandlerConfig{
		RedirectURL:                    "http://localhost:3000/callback",
		AuthorizationCodeFetcher:       follow,
		ClientIDMetadataDocumentConfig: &auth.ClientIDMetadataDocumentConfig{URL: "https://conformance-test.local/client-metadata.json"},
		DynamicClientRegistrationConfig: &auth.DynamicClientRegistrationConfig{
			Metadata: &oauthex.ClientRegistrationMetadata{RedirectURIs: []string{"http://localhost:3000/callback"}}},
	}
	var given struct {
		ClientID     string `json:"client_id"`
		ClientSecret string `json:"client_secret"`
	}
	if json.Unmarshal([]byte(os.Getenv("MCP_CONFORMANCE_CONTEXT")), &given) == nil && given.ClientID != "" {
		cfg.PreregisteredClient = &oauthex.ClientCredentials{ClientID: given.ClientID,
			ClientSecretAuth: &oauthex.ClientSecretAuth{ClientSecret: given.ClientSecret}}
	}
	return auth.NewAuthorizationCodeHandler(cfg)
}

// follow asks for the authorization and reads the code from where the
// server redirects (the suite's server grants it at once).
func follow(ctx context.Context, args *auth.AuthorizationArgs) (*auth.AuthorizationResult, error) {
	client := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, args.URL, nil)
	if err != nil {
		return nil, err
	}
	resp, err := client.Do(req)
	if err != nil {
		return nil, err
	}
	resp.Body.Close()
	loc, err := url.Parse(resp.Header.Get("Location"))
	if err != nil {
		return nil, fmt.Errorf("the authorization's redirect: %w", err)
	}
	q := loc.Query()
	return &auth.AuthorizationResult{Code: q.Get("code"), State: q.Get("state"), Iss: q.Get("iss")}, nil
}
