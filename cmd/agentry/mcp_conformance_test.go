package main

import (
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/agentry/agentry/internal/syncbuf"
	"github.com/agentry/agentry/internal/testdb"
)

// The protocol revisions the MCP conformance suite checks agentry at.
var mcpRevisions = []string{"2025-11-25", "2026-07-28"}

// conformanceSuite is the official MCP conformance suite's command line,
// run by Node 22 (npm's node package): scripts/test-deps.sh installs both.
func conformanceSuite(t *testing.T) (node, suite string) {
	t.Helper()
	modules := testdb.NPM(t, "@modelcontextprotocol/conformance")
	testdb.NPM(t, "node")
	return filepath.Join(modules, ".bin", "node"), filepath.Join(modules, "@modelcontextprotocol", "conformance", "dist", "index.js")
}

// runSuite runs the suite with args and the revision's expected failures,
// and fails the test unless its baseline check passes; it logs the
// scenarios that passed and failed.
func runSuite(t *testing.T, node, suite, revision string, args ...string) {
	t.Helper()
	expected, _ := filepath.Abs(filepath.Join("testdata", "mcp-conformance", "expected-failures-"+revision+".yml"))
	cmd := exec.Command(node, append([]string{suite}, append(args, "--spec-version", revision, "--expected-failures", expected)...)...)
	cmd.Dir = t.TempDir() // it may write its results where it runs
	out := &syncbuf.Buffer{}
	cmd.Stdout, cmd.Stderr = out, out
	err := cmd.Run()
	text := out.String()
	passed := len(regexp.MustCompile(`(?m)^✓ `).FindAllString(text, -1))
	failed := len(regexp.MustCompile(`(?m)^✗ `).FindAllString(text, -1))
	total := regexp.MustCompile(`(?m)^Total: .*$`).FindString(text)
	t.Logf("%s: %d scenarios passed, %d failed (expected); checks: %s", revision, passed, failed, strings.TrimPrefix(total, "Total: "))
	t.Logf("%s: failed: %s", revision, strings.Join(regexp.MustCompile(`(?m)^✗ .*$`).FindAllString(text, -1), "; "))
	if err != nil || !strings.Contains(text, "Baseline check passed") {
		t.Fatalf("the conformance suite: %v\n%s", err, text)
	}
}

// The official MCP conformance suite in server mode against agentry mcp
// serve over streamable HTTP, at each revision: every failure is one the
// expected-failures file lists with its reason, and none of those passes.
func TestMCPConformanceServer(t *testing.T) {
	node, suite := conformanceSuite(t)
	dir, _ := filepath.Abs(filepath.Join("testdata", "mcp-conformance"))
	for _, rev := range mcpRevisions {
		t.Run(rev, func(t *testing.T) {
			s := startServing(t, "mcp", "serve", "--transport", "http", "--addr", "127.0.0.1:0", "--agents", filepath.Join(dir, "agents"),
				"--prompts", filepath.Join(dir, "prompts"), "--db", filepath.Join(t.TempDir(), "runs.db"))
			runSuite(t, node, suite, rev, "server", "--url", s.base+"/mcp")
		})
	}
}

// The official MCP conformance suite in client mode against agentry's MCP
// client: it starts internal/mcpconformance per scenario, an agent whose
// tools are the scenario's server's.
func TestMCPConformanceClient(t *testing.T) {
	node, suite := conformanceSuite(t)
	bin := filepath.Join(t.TempDir(), "mcpconformance")
	if out, err := exec.Command("go", "build", "-o", bin, "../../internal/mcpconformance").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	for _, rev := range mcpRevisions {
		t.Run(rev, func(t *testing.T) {
			runSuite(t, node, suite, rev, "client", "--command", bin, "--suite", "all")
		})
	}
}
