// Command server is a small MCP server, built with the official Go SDK,
// that the example agent starts over stdio: a notebook with a tool to
// add a note and one to list them.
package main

import (
	"context"
	"fmt"
	"log"
	"strings"
	"sync"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

type addIn struct {
	Text string `json:"text" jsonschema:"the note"`
}

type listOut struct {
	Notes []string `json:"notes"`
}

func main() {
	var mu sync.Mutex
	var notes []string
	s := mcp.NewServer(&mcp.Implementation{Name: "notebook", Version: "1"}, nil)
	no := false
	mcp.AddTool(s, &mcp.Tool{Name: "add_note", Description: "Add a note to the notebook",
		Annotations: &mcp.ToolAnnotations{DestructiveHint: &no}},
		func(_ context.Context, _ *mcp.CallToolRequest, in addIn) (*mcp.CallToolResult, any, error) {
			if strings.TrimSpace(in.Text) == "" {
				return nil, nil, fmt.Errorf("a note needs text")
			}
			mu.Lock()
			defer mu.Unlock()
			notes = append(notes, in.Text)
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: fmt.Sprintf("note %d added", len(notes))}}}, nil, nil
		})
	mcp.AddTool(s, &mcp.Tool{Name: "list_notes", Description: "List the notes",
		Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true}},
		func(context.Context, *mcp.CallToolRequest, struct{}) (*mcp.CallToolResult, listOut, error) {
			mu.Lock()
			defer mu.Unlock()
			return nil, listOut{Notes: append([]string{}, notes...)}, nil
		})
	if err := s.Run(context.Background(), &mcp.StdioTransport{}); err != nil {
		log.Fatal(err)
	}
}
