package main

import (
	"strings"
	"testing"
)

func TestRun(t *testing.T) {
	var out strings.Builder
	if err := run(&out); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"task: ship the next release",
		"stages: planner:success executor:success reviewer:success planner:success executor:success reviewer:success",
		"released: 2.0.1, approved: true, hops: 6", "outcome: success (completed)"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("the output lacks %q:\n%s", want, out.String())
		}
	}
}
