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
	for _, want := range []string{"title: Go 1.26", "points: faster GC; new iterators",
		"turns: 3, validated: true, model calls: 4", "activity: writer:turn_start writer:tool_call_start researcher:turn_start researcher:run_end writer:turn_start writer:turn_start writer:run_end",
		"registered: 2 agents, writer is v1"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("the output lacks %q:\n%s", want, out.String())
		}
	}
}
