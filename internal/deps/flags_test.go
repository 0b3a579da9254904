package deps

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// TestLibraryErrorsSpeakGo: the library's messages name Go options and
// spec fields, never the binary's flags: a Go program that gets one has
// no flag to pass. Only the binary (cmd/) and the server (whose operator
// starts it with flags, and whose clients read its answers) may name them.
func TestLibraryErrorsSpeakGo(t *testing.T) {
	flag := regexp.MustCompile(`(^|[\s(])--[a-z][a-z-]+`)
	root := "../.."
	err := filepath.WalkDir(root, func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, path)
		if d.IsDir() {
			switch rel {
			case "cmd", "examples", "internal", "server", "scripts", "docs", ".git":
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(token.NewFileSet(), path, nil, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		ast.Inspect(f, func(n ast.Node) bool {
			if lit, ok := n.(*ast.BasicLit); ok && lit.Kind == token.STRING && flag.MatchString(lit.Value) {
				t.Errorf("%s: %s names a flag of the binary", rel, lit.Value)
			}
			return true
		})
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
