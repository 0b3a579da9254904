// Package files provides the file connector: file_read, file_list,
// file_search and file_write, confined to one directory (an os.Root). A path with "..",
// an absolute path, or a symbolic link that leaves the root is refused;
// file_write exists only when writes are allowed; a file over the size
// cap is refused rather than cut.
package files

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"
	"unicode/utf8"

	"github.com/agentry/agentry/internal/strictjson"
	"github.com/agentry/agentry/tool"
)

// Options configure the file tools.
type Options struct {
	// Root is the directory the tools are confined to. Required.
	Root string
	// Write adds file_write (off by default).
	Write bool
	// MaxBytes caps a file read or written; default 1 MiB.
	MaxBytes int64
	// MaxEntries caps a listing; default 1000.
	MaxEntries int
}

// Tools returns file_read, file_list and file_search, and file_write when o.Write,
// over the directory o.Root, which must exist.
func Tools(o Options) ([]tool.Tool, error) {
	if o.Root == "" {
		return nil, errors.New("files: no root directory")
	}
	root, err := os.OpenRoot(o.Root)
	if err != nil {
		return nil, fmt.Errorf("files: root: %w", err)
	}
	root.Close() // it exists; each call opens it again, so no descriptor outlives a call
	if o.MaxBytes <= 0 {
		o.MaxBytes = 1 << 20
	}
	if o.MaxEntries <= 0 {
		o.MaxEntries = 1000
	}
	c := &conn{o: o}
	out := []tool.Tool{
		tool.Must(tool.Func("file_read", "Read a text file under the working directory (a relative path).", c.read,
			tool.WithIdempotency(tool.Safe))),
		tool.Must(tool.Func("file_list", "List a directory under the working directory (a relative path; \".\" for the top).", c.list,
			tool.WithIdempotency(tool.Safe))),
		tool.Must(tool.Func("file_search", "Find the lines that match a regular expression in the text files under the working directory "+
			"(or under a path of it), with their file and line number.", c.search, tool.WithIdempotency(tool.Safe))),
	}
	if o.Write {
		out = append(out, tool.Must(tool.Func("file_write",
			"Write a text file under the working directory (a relative path), replacing it.", c.write,
			tool.WithIdempotency(tool.Idempotent))))
	}
	return out, nil
}

type conn struct{ o Options }

// open opens the root for one call.
func (c *conn) open() (*os.Root, error) {
	r, err := os.OpenRoot(c.o.Root)
	if err != nil {
		return nil, tool.NewErrorDetails("file_error", "the working directory: "+err.Error(), false)
	}
	return r, nil
}

type readArgs struct {
	Path string `json:"path" jsonschema:"A path relative to the working directory."`
}

type writeArgs struct {
	Path    string `json:"path" jsonschema:"A path relative to the working directory."`
	Content string `json:"content" jsonschema:"The whole text of the file."`
}

// File is what file_read returns.
type File struct {
	Path    string `json:"path"`
	Size    int64  `json:"size"`
	Content string `json:"content"`
}

// Entry is one entry of a listing.
type Entry struct {
	Name string `json:"name"`
	Dir  bool   `json:"dir,omitempty"`
	Size int64  `json:"size,omitempty"`
}

// Listing is what file_list returns.
type Listing struct {
	Path      string  `json:"path"`
	Entries   []Entry `json:"entries"`
	Truncated bool    `json:"truncated,omitempty"`
}

// clean checks a path a model wrote: relative, without "..". os.Root
// refuses what leaves the root anyway; this names the problem first.
func clean(p string) (string, error) {
	switch {
	case p == "":
		return "", tool.NewErrorDetails("invalid_arguments", "path is empty", true)
	case path.IsAbs(p) || strings.HasPrefix(p, `\`) || (len(p) > 1 && p[1] == ':'):
		return "", tool.NewErrorDetails("invalid_arguments", fmt.Sprintf("path %q is absolute; give a path relative to the working directory", p), true)
	}
	for _, part := range strings.Split(strings.ReplaceAll(p, `\`, "/"), "/") {
		if part == ".." {
			return "", tool.NewErrorDetails("invalid_arguments", fmt.Sprintf("path %q leaves the working directory (..)", p), true)
		}
	}
	return path.Clean(p), nil
}

// failure turns a file system error into what the model is told.
func failure(p string, err error) error {
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return tool.NewErrorDetails("not_found", fmt.Sprintf("%s does not exist", p), true)
	case strings.Contains(err.Error(), "escapes from parent") || strings.Contains(err.Error(), "path escapes"):
		return tool.NewErrorDetails("invalid_arguments", fmt.Sprintf("path %q leads outside the working directory (a link out of it)", p), true)
	}
	return tool.NewErrorDetails("file_error", err.Error(), false)
}

// openFile opens the file or directory at the path a model wrote, under
// the root.
func (c *conn) openFile(raw string) (string, *os.File, error) {
	p, err := clean(raw)
	if err != nil {
		return "", nil, err
	}
	root, err := c.open()
	if err != nil {
		return "", nil, err
	}
	defer root.Close() // the open file stays usable
	f, err := root.Open(p)
	if err != nil {
		return "", nil, failure(raw, err)
	}
	return p, f, nil
}

func (c *conn) read(_ context.Context, a readArgs) (*File, error) {
	p, f, err := c.openFile(a.Path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, failure(a.Path, err)
	}
	if st.IsDir() {
		return nil, tool.NewErrorDetails("invalid_arguments", fmt.Sprintf("%s is a directory; list it with file_list", a.Path), true)
	}
	if st.Size() > c.o.MaxBytes {
		return nil, tool.NewErrorDetails("too_large", fmt.Sprintf("%s has %d bytes, over the %d-byte cap", a.Path, st.Size(), c.o.MaxBytes), false)
	}
	data, err := io.ReadAll(io.LimitReader(f, c.o.MaxBytes+1))
	if err != nil {
		return nil, failure(a.Path, err)
	}
	if int64(len(data)) > c.o.MaxBytes {
		return nil, tool.NewErrorDetails("too_large", fmt.Sprintf("%s is over the %d-byte cap", a.Path, c.o.MaxBytes), false)
	}
	if !utf8.Valid(data) {
		return nil, tool.NewErrorDetails("unsupported_content", fmt.Sprintf("%s is not UTF-8 text", a.Path), false)
	}
	return &File{Path: p, Size: int64(len(data)), Content: string(data)}, nil
}

func (c *conn) list(_ context.Context, a readArgs) (*Listing, error) {
	p, f, err := c.openFile(a.Path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	entries, err := f.ReadDir(c.o.MaxEntries + 1)
	if err != nil && err != io.EOF {
		return nil, failure(a.Path, err)
	}
	out := &Listing{Path: p, Entries: []Entry{}}
	if len(entries) > c.o.MaxEntries {
		entries, out.Truncated = entries[:c.o.MaxEntries], true
	}
	for _, e := range entries {
		en := Entry{Name: e.Name(), Dir: e.IsDir()}
		if info, err := e.Info(); err == nil && !e.IsDir() {
			en.Size = info.Size()
		}
		out.Entries = append(out.Entries, en)
	}
	sort.Slice(out.Entries, func(i, j int) bool { return out.Entries[i].Name < out.Entries[j].Name })
	return out, nil
}

func (c *conn) write(_ context.Context, a writeArgs) (map[string]any, error) {
	p, err := clean(a.Path)
	if err != nil {
		return nil, err
	}
	if int64(len(a.Content)) > c.o.MaxBytes {
		return nil, tool.NewErrorDetails("too_large", fmt.Sprintf("content of %d bytes is over the %d-byte cap", len(a.Content), c.o.MaxBytes), true)
	}
	root, err := c.open()
	if err != nil {
		return nil, err
	}
	defer root.Close()
	if dir := path.Dir(p); dir != "." {
		if err := root.MkdirAll(dir, 0o750); err != nil {
			return nil, failure(a.Path, err)
		}
	}
	f, err := root.OpenFile(p, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o640)
	if err != nil {
		return nil, failure(a.Path, err)
	}
	if _, err := f.WriteString(a.Content); err != nil {
		f.Close()
		return nil, failure(a.Path, err)
	}
	if err := f.Close(); err != nil {
		return nil, failure(a.Path, err)
	}
	return map[string]any{"path": p, "written": len(a.Content)}, nil
}

// config is the spec's "connectors": {"files": {...}}.
type config struct {
	Root       string `json:"root"`
	Write      bool   `json:"write,omitempty"`
	MaxBytes   int64  `json:"max_bytes,omitempty"`
	MaxEntries int    `json:"max_entries,omitempty"`
}

// The connector "files": {"root": DIR, "write": false, "max_bytes": N,
// "max_entries": N}; a relative root is the spec's directory's.
func init() {
	tool.RegisterConnector("files", func(raw json.RawMessage, baseDir string) ([]tool.Tool, func() error, error) {
		var c config
		if err := strictjson.Decode(raw, &c); err != nil {
			return nil, nil, err
		}
		if c.Root == "" {
			return nil, nil, errors.New("root: required (the directory the file tools are confined to)")
		}
		if c.MaxBytes < 0 || c.MaxEntries < 0 {
			return nil, nil, errors.New("max_bytes and max_entries must not be negative")
		}
		root := c.Root
		if !filepath.IsAbs(root) {
			root = filepath.Join(baseDir, root)
		}
		tools, err := Tools(Options{Root: root, Write: c.Write, MaxBytes: c.MaxBytes, MaxEntries: c.MaxEntries})
		return tools, nil, err // each call opens the root again: nothing stays open
	})
}
