package mcp_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/agentry/agentry/spec"
	"github.com/agentry/agentry/tool/mcp"
)

// An MCP server's tools as agentry tools: their model names, their
// classes from their annotations, and a call. An agent gets the same from
// its spec's "mcp_servers" and "tools": ["mcp:weather/*"].
func ExampleOpen() {
	// A server built with the official SDK, over streamable HTTP.
	srv := sdk.NewServer(&sdk.Implementation{Name: "weather", Version: "1"}, nil)
	sdk.AddTool(srv, &sdk.Tool{Name: "forecast.today", Description: "Today's forecast for a city",
		Annotations: &sdk.ToolAnnotations{ReadOnlyHint: true}},
		func(_ context.Context, _ *sdk.CallToolRequest, in struct {
			City string `json:"city"`
		}) (*sdk.CallToolResult, any, error) {
			return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: "Sunny in " + in.City}}}, nil, nil
		})
	hs := httptest.NewServer(sdk.NewStreamableHTTPHandler(func(*http.Request) *sdk.Server { return srv }, nil))
	defer hs.Close()

	c, err := mcp.Open(context.Background(), spec.MCPServer{Name: "weather", URL: hs.URL}, mcp.Options{})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer c.Close()
	tools, _ := c.Tools(context.Background())
	for _, t := range tools {
		info := t.Info()
		fmt.Println(info.Name, "calls", t.Remote(), "-", info.Idempotency, info.Risk)
		out, err := t.Call(context.Background(), []byte(`{"city": "Lisbon"}`))
		fmt.Println(string(out), err)
	}
	// Output:
	// forecast_today calls forecast.today - safe low
	// "Sunny in Lisbon" <nil>
}
