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
	for _, want := range []string{`weather({"city":"Oslo"}) -> success`, `weather({"city":"Lisbon"}) -> success`,
		"Lisbon is warmer: 19°C against 3°C in Oslo.", "2 turns, 374 tokens"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("the output lacks %q:\n%s", want, out.String())
		}
	}
}
