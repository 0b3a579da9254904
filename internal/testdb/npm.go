package testdb

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// NPM is the node_modules of the pinned npm packages scripts/test-deps.sh
// installs (AGENTRY_TEST_NPM), checked to hold pkg, with node on PATH;
// without them the test is skipped, or fails under
// AGENTRY_REQUIRE_SERVICES (scripts/test.sh).
func NPM(t testing.TB, pkg string) string {
	t.Helper()
	dir := os.Getenv("AGENTRY_TEST_NPM")
	_, err := os.Stat(filepath.Join(dir, pkg))
	_, noNode := exec.LookPath("node")
	if dir == "" || err != nil || noNode != nil {
		missing(t, "no node, or no npm package "+pkg+" in AGENTRY_TEST_NPM", "installs them")
	}
	return dir
}
