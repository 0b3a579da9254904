package mcp

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// What a result becomes: a large text resource is a reference too, and
// a result whose media would fill the disk is refused, keeping nothing.
func TestOutputLimits(t *testing.T) {
	dir := t.TempDir()
	big := strings.Repeat("a line of a long log\n", 4000) // 80 KB
	out, refs, err := output(&sdk.CallToolResult{Content: []sdk.Content{
		&sdk.EmbeddedResource{Resource: &sdk.ResourceContents{URI: "log://today", MIMEType: "text/plain", Text: big}}}}, media(dir))
	if err != nil || len(refs) != 1 || strings.Contains(string(out), "a line of") {
		t.Fatalf("%s, %v, %v", out, refs, err)
	}
	var got struct {
		Content []map[string]any `json:"content"`
	}
	json.Unmarshal(out, &got)
	if item := got.Content[0]; item["uri"] != "log://today" || item["size"] != float64(len(big)) || item["mime_type"] != "text/plain" {
		t.Errorf("item %v", item)
	}
	files, _ := filepath.Glob(filepath.Join(dir, "*"))
	if len(files) != 1 {
		t.Fatalf("files %v", files)
	}
	if data, _ := os.ReadFile(files[0]); string(data) != big {
		t.Errorf("the kept file holds %d bytes", len(data))
	}

	flood := make([]byte, maxMedia/2+1)
	_, _, err = output(&sdk.CallToolResult{Content: []sdk.Content{&sdk.ImageContent{Data: flood, MIMEType: "image/png"},
		&sdk.AudioContent{Data: flood, MIMEType: "audio/wav"}}}, media(filepath.Join(dir, "flood")))
	if err == nil || !strings.Contains(err.Error(), "over the") {
		t.Errorf("a flood: %v", err)
	}
	if _, err := os.Stat(filepath.Join(dir, "flood")); !os.IsNotExist(err) {
		t.Errorf("the flood left a directory: %v", err)
	}
}
