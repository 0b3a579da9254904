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
	for _, want := range []string{"answer: They make most of the cell's ATP.", "steps: 2, tools: [lookup], source quality: high",
		"first thought: I should check the notes first.", "reasoning:", "trace id: 4bf92f3577b34da6a3ce929d0e0e4736"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("the output lacks %q:\n%s", want, out.String())
		}
	}
}
