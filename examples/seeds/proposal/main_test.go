package main

import (
	"path/filepath"
	"strings"
	"testing"
)

func TestRun(t *testing.T) {
	var out strings.Builder
	if err := run(&out, filepath.Join(t.TempDir(), "runs.db")); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"paused: awaiting_approval, waiting for kv_set", "answer: Espresso costs 2.40 EUR; saved.",
		"tools: [http_get kv_set], deterministic: true, started: 2026-11-26T09:00:00Z", "audit: approval.tools", "by ada",
		"stored: completed (success)",
		`refused: policy violation: cleaner@v1: user ada (roles: builder) may not create connector:shell: "*" is for the roles admin`} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("the output lacks %q:\n%s", want, out.String())
		}
	}
}
