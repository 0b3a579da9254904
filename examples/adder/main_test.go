package main

import (
	"io"
	"os"
	"strings"
	"testing"
)

// TestRun runs the program as `go run ./examples/adder` would, from the
// repository's root.
func TestRun(t *testing.T) {
	t.Chdir("../..")
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout := os.Stdout
	os.Stdout = w
	main()
	os.Stdout = stdout
	w.Close()
	out, _ := io.ReadAll(r)
	if !strings.HasPrefix(string(out), "event: run_start\n") || !strings.HasSuffix(string(out), "event: run_end\n2 + 3 = 5 completed 158\n") {
		t.Errorf("output:\n%s", out)
	}
}

// TestREADME keeps the README's Go example the body of this program, so
// that what the README shows compiles and runs.
func TestREADME(t *testing.T) {
	src, err := os.ReadFile("main.go")
	if err != nil {
		t.Fatal(err)
	}
	_, body, _ := strings.Cut(string(src), "func main() {\n")
	body = strings.TrimSuffix(strings.TrimSpace(body), "}")
	var want strings.Builder
	for line := range strings.Lines(body) {
		want.WriteString(strings.TrimPrefix(line, "\t"))
	}
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(readme), "```go\n"+want.String()+"```") {
		t.Errorf("README.md's Go example is not the body of examples/adder/main.go:\n%s", want.String())
	}
}
