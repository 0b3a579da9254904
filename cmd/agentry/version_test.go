package main

import (
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/agentry/agentry"
)

// TestVersion: the binary reports the module's version, by its command
// and its flag, and CHANGELOG.md's newest entry is that version: a
// release cannot leave either behind.
func TestVersion(t *testing.T) {
	for _, args := range [][]string{{"version"}, {"--version"}} {
		code, out, errs := run(t, args...)
		if code != 0 || !strings.HasPrefix(out, "agentry "+agentry.Version+" ") || !strings.Contains(out, " go1.") || errs != "" {
			t.Errorf("agentry %s: exit %d, %q %q; want it to start with agentry %s", args[0], code, out, errs, agentry.Version)
		}
	}
	b, err := os.ReadFile("../../CHANGELOG.md")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^## \[?v?([0-9][^\] ]*)`).FindSubmatch(b)
	if m == nil || string(m[1]) != agentry.Version {
		t.Errorf("CHANGELOG.md's newest version is %q, the module's %q", m, agentry.Version)
	}
}
