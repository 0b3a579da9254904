package server

import (
	"os"
	"testing"

	"github.com/agentry/agentry/tool"
	"github.com/agentry/agentry/tool/kv"
)

func kvRegistry(t testing.TB) *tool.Registry {
	t.Helper()
	r, err := tool.NewRegistry(kv.Tools(kv.NewStore())...)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func writeFile(t *testing.T, path, text string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
}
