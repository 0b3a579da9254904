package deps

import (
	"encoding/json"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

const mod = "github.com/agentry/agentry"

// pkg is what go list says of a package.
type pkg struct {
	ImportPath string
	Standard   bool
	Imports    []string
	Deps       []string
}

// list is go list -deps of patterns, by import path.
func list(t *testing.T, patterns ...string) map[string]pkg {
	t.Helper()
	cmd := exec.Command("go", append([]string{"list", "-deps", "-json=ImportPath,Standard,Imports,Deps"}, patterns...)...)
	cmd.Dir = "../.."
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	pkgs := map[string]pkg{}
	dec := json.NewDecoder(strings.NewReader(string(out)))
	for dec.More() {
		var p pkg
		if err := dec.Decode(&p); err != nil {
			t.Fatal(err)
		}
		pkgs[p.ImportPath] = p
	}
	return pkgs
}

// layers are agentry's packages from the bottom up (a name is the path
// under the module, and everything below it): a package imports those
// of its own layer (spec names tools, policy redacts events) and of
// lower layers, never a higher one's.
var layers = [][]string{
	{"event", "schema", "retry", "internal/ids", "internal/registry", "internal/strictjson", "internal/httphdr",
		"internal/lazyctx", "internal/syncbuf", "internal/telemetry", "internal/testdb", "internal/wiretest", "internal/coverfloor", "internal/browsertest"},
	{"spec", "llm", "tool", "prompt", "react", "policy", "memory", "store", "runlog", "internal/journal", "internal/memseal", "internal/livetest",
		"internal/teststore"},
	{"agent"},
	{"pipeline", "eval"},
	{"temporal", "server", "internal/mcpconformance"},
	{"cmd", "examples"},
}

// layerOf is the layer of an agentry package, -1 for one the layers do
// not name.
func layerOf(path string) int {
	if path == mod {
		return 0 // the module's root: its version, importing nothing
	}
	rel, ok := strings.CutPrefix(path, mod+"/")
	if !ok {
		return -1
	}
	for i, l := range layers {
		for _, name := range l {
			if rel == name || strings.HasPrefix(rel, name+"/") {
				return i
			}
		}
	}
	return -1
}

// TestArrowsPointDown: no agentry package imports one of a higher layer.
func TestArrowsPointDown(t *testing.T) {
	pkgs := list(t, "./...")
	for _, p := range pkgs {
		from := layerOf(p.ImportPath)
		if from < 0 {
			if strings.HasPrefix(p.ImportPath, mod) && !strings.HasSuffix(p.ImportPath, "internal/deps") {
				t.Errorf("%s is in no layer of the graph: place it", p.ImportPath)
			}
			continue
		}
		for _, imp := range p.Imports {
			if to := layerOf(imp); to > from {
				t.Errorf("%s imports %s, which is above it", p.ImportPath, imp)
			}
		}
	}
}

// apart are pairs of packages of one layer (or below) that must not
// know each other, beyond what the layers say: a package that defines a
// concept knows none of its implementations, and the hosts of runs know
// nothing of each other. A path names the package alone.
var apart = []struct{ from, to string }{
	{"memory", "memory/"},          // memory knows none of its backends or memdriver
	{"runlog", "internal/journal"}, // reading knows nothing of writing
	{"tool", "tool/"},              // tools register themselves
	{"llm", "llm/"},                // providers register themselves
	{"store", "store/"},            // backends register themselves
	{"server", "temporal"},         // the binary gives the server its Remote
	{"temporal", "server"},
	{"eval", "server"},
}

// TestApart: the pairs of apart import neither each other's package nor,
// for a prefix ending in "/", any package below it.
func TestApart(t *testing.T) {
	pkgs := list(t, "./...")
	for _, a := range apart {
		p, ok := pkgs[mod+"/"+a.from]
		if !ok {
			t.Errorf("%s: no such package", a.from)
			continue
		}
		for _, imp := range p.Imports {
			rel, _ := strings.CutPrefix(imp, mod+"/")
			if rel == a.to || (strings.HasSuffix(a.to, "/") && strings.HasPrefix(rel, a.to)) {
				t.Errorf("%s imports %s", a.from, imp)
			}
		}
	}
}

// wire are the modules that speak a wire protocol or an engine's: a
// program links one only when it names what needs it.
var wire = []string{
	"google.golang.org/grpc", "google.golang.org/protobuf", "github.com/a2aproject/", "github.com/modelcontextprotocol/",
	"go.temporal.io/", "github.com/openai/", "github.com/anthropics/", "google.golang.org/genai",
	"github.com/jackc/pgx", "github.com/redis/",
}

// TestSmallestAgentLinksLittle: the smallest Go agent (examples/adder: a
// tool made in Go, the scripted model) links no wire protocol and at
// most 60 third-party packages; agent itself links none either.
func TestSmallestAgentLinksLittle(t *testing.T) {
	for _, target := range []string{"./examples/adder", "./agent"} {
		pkgs := list(t, target)
		var third []string
		for path, p := range pkgs {
			if p.Standard || strings.HasPrefix(path, mod) {
				continue
			}
			third = append(third, path)
			for _, w := range wire {
				if strings.HasPrefix(path, w) {
					t.Errorf("%s links %s", target, path)
				}
			}
		}
		if target == "./examples/adder" && len(third) > 60 {
			t.Errorf("%s links %d third-party packages, over 60", target, len(third))
		}
	}
}

// TestSizes: no file of code is over 600 lines and no function over 80:
// past them, a file or a function is split by meaning.
func TestSizes(t *testing.T) {
	fset := token.NewFileSet()
	err := filepath.WalkDir("../..", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (strings.HasPrefix(d.Name(), ".") || d.Name() == "testdata" || d.Name() == "node_modules") && path != "../.." {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, 0)
		if err != nil {
			return err
		}
		if n := fset.Position(f.End()).Line; n > 600 {
			t.Errorf("%s has %d lines, over 600", path, n)
		}
		for _, decl := range f.Decls {
			if fd, ok := decl.(*ast.FuncDecl); ok && fd.Body != nil {
				if n := fset.Position(fd.End()).Line - fset.Position(fd.Pos()).Line + 1; n > 80 {
					t.Errorf("%s: %s has %d lines, over 80", path, fd.Name.Name, n)
				}
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
