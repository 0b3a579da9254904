package files

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"go.uber.org/goleak"

	"github.com/agentry/agentry/tool"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func setup(t *testing.T, write bool) (string, map[string]tool.Tool) {
	t.Helper()
	dir := t.TempDir()
	root := filepath.Join(dir, "root")
	os.MkdirAll(filepath.Join(root, "notes"), 0o750)
	os.WriteFile(filepath.Join(root, "notes", "a.txt"), []byte("hello"), 0o600)
	os.WriteFile(filepath.Join(root, "big.txt"), []byte(strings.Repeat("x", 100)), 0o600)
	os.WriteFile(filepath.Join(dir, "secret.txt"), []byte("outside"), 0o600)
	os.Symlink(filepath.Join(dir, "secret.txt"), filepath.Join(root, "out-link"))
	os.Symlink("notes/a.txt", filepath.Join(root, "in-link"))
	tools, err := Tools(Options{Root: root, Write: write, MaxBytes: 64})
	if err != nil {
		t.Fatal(err)
	}
	m := map[string]tool.Tool{}
	for _, tl := range tools {
		m[tl.Info().Name] = tl
	}
	return root, m
}

func call(tl tool.Tool, args string) (string, error) {
	out, err := tl.Call(context.Background(), json.RawMessage(args))
	return string(out), err
}

func TestRead(t *testing.T) {
	_, tools := setup(t, false)
	if _, ok := tools["file_write"]; ok {
		t.Error("file_write exists though writes are off")
	}
	for _, tc := range []struct{ name, path, want, errType string }{
		{"a file", "notes/a.txt", `"content":"hello"`, ""},
		{"a link inside", "in-link", `"content":"hello"`, ""},
		{"dot segments inside", "notes/./a.txt", `"content":"hello"`, ""},
		{"parent", "../secret.txt", "", "invalid_arguments"},
		{"parent inside a path", "notes/../../secret.txt", "", "invalid_arguments"},
		{"absolute", "/etc/passwd", "", "invalid_arguments"},
		{"a link out", "out-link", "", "invalid_arguments"},
		{"missing", "nope.txt", "", "not_found"},
		{"over the cap", "big.txt", "", "too_large"},
		{"a directory", "notes", "", "invalid_arguments"},
		{"empty", "", "", "invalid_arguments"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, err := call(tools["file_read"], `{"path": "`+tc.path+`"}`)
			if tc.errType == "" {
				if err != nil || !strings.Contains(out, tc.want) {
					t.Errorf("read %q = %s, %v", tc.path, out, err)
				}
				return
			}
			var d *tool.ErrorDetails
			if !errors.As(err, &d) || d.Type != tc.errType {
				t.Errorf("read %q = %s, %v; want a %s error", tc.path, out, err, tc.errType)
			}
			if strings.Contains(out, "outside") {
				t.Errorf("read %q reached a file outside the root", tc.path)
			}
		})
	}
	out, err := call(tools["file_list"], `{"path": "."}`)
	if err != nil || !strings.Contains(out, `{"name":"notes","dir":true}`) || !strings.Contains(out, `"name":"big.txt"`) {
		t.Errorf("list . = %s, %v", out, err)
	}
	if _, err := call(tools["file_list"], `{"path": ".."}`); err == nil {
		t.Error("listing the parent of the root worked")
	}
}

func TestWrite(t *testing.T) {
	root, tools := setup(t, true)
	w := tools["file_write"]
	if w.Info().Idempotency != tool.Idempotent {
		t.Errorf("file_write is %s", w.Info().Idempotency)
	}
	if out, err := call(w, `{"path": "new/deep/b.txt", "content": "written"}`); err != nil || !strings.Contains(out, `"written":7`) {
		t.Fatalf("write = %s, %v", out, err)
	}
	if data, _ := os.ReadFile(filepath.Join(root, "new", "deep", "b.txt")); string(data) != "written" {
		t.Errorf("the file holds %q", data)
	}
	for _, tc := range []struct{ name, args, errType string }{
		{"parent", `{"path": "../evil.txt", "content": "x"}`, "invalid_arguments"},
		{"absolute", `{"path": "/tmp/evil.txt", "content": "x"}`, "invalid_arguments"},
		{"through a link out", `{"path": "out-link", "content": "x"}`, "invalid_arguments"},
		{"over the cap", `{"path": "c.txt", "content": "` + strings.Repeat("y", 65) + `"}`, "too_large"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := call(w, tc.args)
			var d *tool.ErrorDetails
			if !errors.As(err, &d) || d.Type != tc.errType {
				t.Errorf("write %s = %v; want a %s error", tc.args, err, tc.errType)
			}
		})
	}
	if data, _ := os.ReadFile(filepath.Join(filepath.Dir(root), "secret.txt")); string(data) != "outside" {
		t.Errorf("a file outside the root was changed: %q", data)
	}
	if _, err := Tools(Options{Root: filepath.Join(root, "missing")}); err == nil {
		t.Error("a missing root was accepted")
	}
	if _, err := Tools(Options{}); err == nil {
		t.Error("no root was accepted")
	}
}
