// Package livetest gates tests that call a vendor's real API: they run only
// when the vendor's key is in the environment, and never under CI.
package livetest

import (
	"os"
	"testing"
)

// Key returns the value of env, or skips the test: when it is unset, or
// when CI is set (live calls cost money and flake on networks CI does not
// have).
func Key(t testing.TB, env string) string {
	t.Helper()
	if os.Getenv("CI") != "" {
		t.Skip("live API tests never run in CI")
	}
	k := os.Getenv(env)
	if k == "" {
		t.Skipf("%s is not set: live API test skipped", env)
	}
	return k
}
