package mcp

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"mime"
	"net/url"
	"os"
	"path/filepath"
	"strings"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// output is the tool output a result becomes (docs/mcp.md):
//   - its structuredContent, when it has one and nothing but text beside it;
//   - its text, as one JSON string, when it is only text;
//   - otherwise {"content": [...], "structured_content": ...}, where
//     images, audio and binary resources are references to files in the
//     media directory (mime type, size, SHA-256), not their bytes.
//
// refs are the files it refers to.
func output(res *sdk.CallToolResult, m media) (out json.RawMessage, refs []string, err error) {
	textOnly := true
	var texts []string
	for _, c := range res.Content {
		t, ok := c.(*sdk.TextContent)
		if !ok {
			textOnly = false
			break
		}
		texts = append(texts, t.Text)
	}
	switch {
	case textOnly && res.StructuredContent != nil:
		out, err = json.Marshal(res.StructuredContent)
		return out, nil, err
	case textOnly && len(texts) > 0:
		out, err = json.Marshal(strings.Join(texts, "\n"))
		return out, nil, err
	}
	size := 0
	for _, c := range res.Content {
		size += mediaSize(c)
	}
	if size > maxMedia {
		return nil, nil, fmt.Errorf("the result's images, audio and resources come to %d bytes, over the %d a result may keep", size, maxMedia)
	}
	items := make([]map[string]any, 0, len(res.Content))
	for _, c := range res.Content {
		item, err := m.item(c)
		if err != nil {
			return nil, nil, err
		}
		if ref, ok := item["ref"].(string); ok {
			refs = append(refs, ref)
		}
		items = append(items, item)
	}
	whole := map[string]any{"content": items}
	if res.StructuredContent != nil {
		whole["structured_content"] = res.StructuredContent
	}
	out, err = json.Marshal(whole)
	return out, refs, err
}

// media is the directory where results' bytes are kept.
type media string

func (c *Client) media() media {
	dir := c.cfg.MediaDir
	switch {
	case dir == "":
		dir = defaultMediaDir()
	case !filepath.IsAbs(dir):
		dir = filepath.Join(c.o.BaseDir, dir)
	}
	if abs, err := filepath.Abs(dir); err == nil {
		dir = abs // the references are file URLs
	}
	return media(dir)
}

// defaultMediaDir is the user's own: agentry/media in the user's cache
// directory, not a shared temporary one another user could create first.
func defaultMediaDir() string {
	if dir, err := os.UserCacheDir(); err == nil {
		return filepath.Join(dir, "agentry", "media")
	}
	return filepath.Join(os.TempDir(), fmt.Sprintf("agentry-media-%d", os.Getuid()))
}

// The limits on what a result keeps: a server cannot fill the disk, and
// a large text resource is a reference too.
const (
	maxMedia      = 64 << 20 // bytes of media one result may keep
	maxInlineText = 64 << 10 // an embedded text resource past this is kept as a file
)

func (m media) item(c sdk.Content) (map[string]any, error) {
	switch c := c.(type) {
	case *sdk.TextContent:
		return map[string]any{"type": "text", "text": c.Text}, nil
	case *sdk.ImageContent:
		return m.keep("image", c.MIMEType, c.Data)
	case *sdk.AudioContent:
		return m.keep("audio", c.MIMEType, c.Data)
	case *sdk.ResourceLink:
		item := map[string]any{"type": "resource_link", "uri": c.URI, "name": c.Name}
		putNonEmpty(item, "title", c.Title)
		putNonEmpty(item, "description", c.Description)
		putNonEmpty(item, "mime_type", c.MIMEType)
		if c.Size != nil {
			item["size"] = *c.Size
		}
		return item, nil
	case *sdk.EmbeddedResource:
		r := c.Resource
		if r == nil {
			return map[string]any{"type": "resource"}, nil
		}
		if r.Blob == nil && len(r.Text) <= maxInlineText {
			item := map[string]any{"type": "resource", "uri": r.URI, "text": r.Text}
			putNonEmpty(item, "mime_type", r.MIMEType)
			return item, nil
		}
		data := r.Blob
		if data == nil {
			data = []byte(r.Text)
		}
		item, err := m.keep("resource", r.MIMEType, data)
		if err == nil {
			item["uri"] = r.URI
		}
		return item, err
	}
	b, err := c.MarshalJSON()
	if err != nil {
		return nil, err
	}
	var item map[string]any
	return item, json.Unmarshal(b, &item)
}

// keep writes data to the media directory under its SHA-256 (once: the
// same bytes are one file) and returns the reference that replaces it.
func (m media) keep(kind, mimeType string, data []byte) (map[string]any, error) {
	sum := sha256.Sum256(data)
	hash := hex.EncodeToString(sum[:])
	name := hash + extension(mimeType)
	path := filepath.Join(string(m), name)
	if _, err := os.Stat(path); err != nil {
		if err := os.MkdirAll(string(m), 0o700); err != nil {
			return nil, fmt.Errorf("keeping a %s: %w", kind, err)
		}
		tmp, err := os.CreateTemp(string(m), name+".*")
		if err != nil {
			return nil, fmt.Errorf("keeping a %s: %w", kind, err)
		}
		_, werr := tmp.Write(data)
		cerr := tmp.Close()
		if werr == nil {
			werr = cerr
		}
		if werr == nil {
			werr = os.Rename(tmp.Name(), path)
		}
		if werr != nil {
			_ = os.Remove(tmp.Name())
			return nil, fmt.Errorf("keeping a %s: %w", kind, werr)
		}
	}
	ref := (&url.URL{Scheme: "file", Path: filepath.ToSlash(path)}).String()
	item := map[string]any{"type": kind, "size": len(data), "sha256": hash, "ref": ref}
	putNonEmpty(item, "mime_type", mimeType)
	return item, nil
}

// mediaSize is the bytes c would keep in the media directory.
func mediaSize(c sdk.Content) int {
	switch c := c.(type) {
	case *sdk.ImageContent:
		return len(c.Data)
	case *sdk.AudioContent:
		return len(c.Data)
	case *sdk.EmbeddedResource:
		if r := c.Resource; r != nil {
			return len(r.Blob) + len(r.Text)
		}
	}
	return 0
}

func extension(mimeType string) string {
	if exts, _ := mime.ExtensionsByType(mimeType); len(exts) > 0 {
		return exts[len(exts)-1]
	}
	return ".bin"
}

func putNonEmpty(m map[string]any, k, v string) {
	if v != "" {
		m[k] = v
	}
}
