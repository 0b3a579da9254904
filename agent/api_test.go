package agent

import (
	"bytes"
	"flag"
	"go/ast"
	"go/parser"
	"go/printer"
	"go/token"
	"os"
	"slices"
	"strings"
	"testing"
)

var updateAPI = flag.Bool("update-api", false, "write api.txt from the package's exports")

// TestAPI: api.txt is the reviewed listing of what agent exports, one
// line a name (as Go's own api/*.txt): a change to the exported API is a
// visible diff of it, made with go test ./agent -run TestAPI -update-api.
func TestAPI(t *testing.T) {
	got := exports(t, ".")
	if *updateAPI {
		if err := os.WriteFile("api.txt", []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile("api.txt")
	if err != nil {
		t.Fatal(err)
	}
	if got != string(want) {
		gl, wl := strings.Split(got, "\n"), strings.Split(string(want), "\n")
		for _, l := range gl {
			if !slices.Contains(wl, l) {
				t.Errorf("exported, not in api.txt: %s", l)
			}
		}
		for _, l := range wl {
			if !slices.Contains(gl, l) {
				t.Errorf("in api.txt, no longer exported: %s", l)
			}
		}
		t.Log("review the change, then: go test ./agent -run TestAPI -update-api")
	}
}

// exports lists the exported names of the package in dir, sorted: its
// funcs and methods with their signatures, its types with their exported
// fields, its consts and vars.
func exports(t *testing.T, dir string) string {
	t.Helper()
	fset := token.NewFileSet()
	pkgs, err := parser.ParseDir(fset, dir, func(fi os.FileInfo) bool { return !strings.HasSuffix(fi.Name(), "_test.go") }, 0)
	if err != nil {
		t.Fatal(err)
	}
	text := func(n any) string {
		var b bytes.Buffer
		printer.Fprint(&b, fset, n)
		return strings.Join(strings.Fields(b.String()), " ")
	}
	var lines []string
	for _, p := range pkgs {
		for _, f := range p.Files {
			for _, d := range f.Decls {
				switch d := d.(type) {
				case *ast.FuncDecl:
					if !d.Name.IsExported() {
						continue
					}
					sig := text(d.Type)
					sig = "func " + d.Name.Name + strings.TrimPrefix(sig, "func")
					if d.Recv != nil {
						recv := text(d.Recv.List[0].Type)
						if !ast.IsExported(strings.TrimLeft(recv, "*")) {
							continue
						}
						sig = "method (" + recv + ") " + strings.TrimPrefix(sig, "func ")
					}
					lines = append(lines, sig)
				case *ast.GenDecl:
					for _, s := range d.Specs {
						switch s := s.(type) {
						case *ast.TypeSpec:
							if !s.Name.IsExported() {
								continue
							}
							switch tt := s.Type.(type) {
							case *ast.StructType:
								lines = append(lines, "type "+s.Name.Name+" struct")
								for _, fl := range tt.Fields.List {
									for _, n := range fl.Names {
										if n.IsExported() {
											lines = append(lines, "type "+s.Name.Name+" struct, "+n.Name+" "+text(fl.Type))
										}
									}
								}
							case *ast.InterfaceType:
								lines = append(lines, "type "+s.Name.Name+" interface")
								for _, m := range tt.Methods.List {
									for _, n := range m.Names {
										lines = append(lines, "type "+s.Name.Name+" interface, "+n.Name+strings.TrimPrefix(text(m.Type), "func"))
									}
								}
							default:
								lines = append(lines, "type "+s.Name.Name+" "+text(s.Type))
							}
						case *ast.ValueSpec:
							kind := "var"
							if d.Tok == token.CONST {
								kind = "const"
							}
							for _, n := range s.Names {
								if n.IsExported() {
									lines = append(lines, kind+" "+n.Name)
								}
							}
						}
					}
				}
			}
		}
	}
	slices.Sort(lines)
	return strings.Join(slices.Compact(lines), "\n") + "\n"
}
