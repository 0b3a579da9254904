package main

import (
	"strings"
	"testing"
)

func TestRun(t *testing.T) {
	var out strings.Builder
	if err := run(&out, "../../agents"); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"chooser: system=Python_Programmer audience=Developer tone=direct (default) depth=detailed (default)",
		"extractor: city=Porto date=2026-12-04 guests=2", `writer: title="Streaming for every provider" after 2 model calls, validated=true`} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("the output lacks %q:\n%s", want, out.String())
		}
	}
}
