package main

import (
	"fmt"
	"sync"
	"testing"
)

// TestServeInMemory: agentry serve --db :memory: serves runs, keeps them
// while it runs (listed, read), and stays ready; a served agent whose
// spec names a scripted model plays the script anew in each run, so
// every run answers alike, one after another and many at once.
func TestServeInMemory(t *testing.T) {
	s := startServing(t, "serve", "--agents", "testdata/served/agents", "--addr", "127.0.0.1:0", "--db", ":memory:")
	run := func() (int, map[string]any) {
		return s.call(t, "POST", "/v1/runs?wait=true", "", `{"agent": "adder", "input": {"task": "store 2"}}`)
	}
	check := func(name string, code int, res map[string]any) {
		t.Helper()
		tools, _ := res["tools_used"].([]any)
		if code != 200 || res["result"] != "done" || res["outcome"] != "success" || len(tools) != 1 {
			t.Errorf("%s: %d %v", name, code, res)
		}
	}
	for i := range 2 {
		code, res := run()
		check(fmt.Sprintf("run %d", i+1), code, res)
	}
	var wg sync.WaitGroup
	for i := range 20 {
		wg.Go(func() {
			code, res := run()
			check(fmt.Sprintf("concurrent run %d", i+1), code, res)
		})
	}
	wg.Wait()
	// The agent's own model, named by another path (from the server's
	// working directory), is its own: the served agent runs it.
	code, res := s.call(t, "POST", "/v1/runs?wait=true", "", `{"agent": "adder", "model": "scripted:testdata/served/models/adder.json", "input": {"task": "store 2"}}`)
	check("its own model by another path", code, res)
	if code, res := s.call(t, "POST", "/v1/runs?wait=true", "", `{"agent": "adder", "model": "scripted:testdata/answer.json", "input": {"task": "x"}}`); code != 400 {
		t.Errorf("another model: %d %v", code, res)
	}
	if code, list := s.call(t, "GET", "/v1/runs?limit=100", "", ""); code != 200 || len(list["runs"].([]any)) != 23 {
		t.Errorf("runs listed: %d %v", code, len(list["runs"].([]any)))
	}
	if code, _ := s.call(t, "GET", "/readyz", "", ""); code != 200 {
		t.Errorf("readyz: %d", code)
	}
	s.stop(t)
}
