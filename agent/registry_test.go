package agent

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/agentry/agentry/llm/scripted"
	"github.com/agentry/agentry/spec"
)

func registered(t *testing.T, name, version string, answers ...string) *Agent {
	t.Helper()
	var turns []scripted.Turn
	for _, a := range answers {
		turns = append(turns, scripted.Turn{Content: a})
	}
	s, err := scripted.New(name, turns...)
	if err != nil {
		t.Fatal(err)
	}
	a, err := New(&spec.Spec{AgentName: name, Version: version, Description: "The " + name + " agent.", SystemText: "Answer."},
		WithProvider(s.Model(), "scripted"))
	if err != nil {
		t.Fatal(err)
	}
	return a
}

func TestRegistry(t *testing.T) {
	r := NewRegistry()
	v1, v2, v10 := registered(t, "echo", "v1", "one"), registered(t, "echo", "v2", "two"), registered(t, "echo", "v10", "ten")
	if err := r.Register(v1, v10, v2); err != nil {
		t.Fatal(err)
	}
	if err := r.Register(registered(t, "echo", "v2", "again")); !errors.Is(err, ErrRegistered) || !strings.Contains(err.Error(), "echo@v2") {
		t.Errorf("a second echo@v2: %v", err)
	}
	tests := []struct {
		ref  string
		want *Agent
		err  string
	}{
		{"echo", v10, ""}, // the newest: v10 after v2
		{"echo@v2", v2, ""},
		{"echo@v3", nil, "echo@v3 (registered: v1, v2, v10)"},
		{"nobody", nil, "nobody"},
	}
	for _, tt := range tests {
		t.Run(tt.ref, func(t *testing.T) {
			got, err := r.Get(tt.ref)
			if got != tt.want || (tt.err == "") != (err == nil) || err != nil && (!errors.Is(err, ErrNotRegistered) || !strings.Contains(err.Error(), tt.err)) {
				t.Errorf("Get(%s) = %v, %v", tt.ref, got, err)
			}
		})
	}
	if all := r.Agents(); len(all) != 3 || all[0] != v1 || all[1] != v2 || all[2] != v10 {
		t.Errorf("Agents: %v", all)
	}
	if !r.Unregister("echo@v10") || r.Unregister("echo@v10") {
		t.Error("Unregister of echo@v10")
	}
	if got, _ := r.Get("echo"); got != v2 {
		t.Errorf("the newest after unregistering v10 is %v", got)
	}
	if !r.Unregister("echo") || len(r.Agents()) != 0 {
		t.Error("Unregister of every version")
	}
}

// TestRegistryIsSafeForConcurrentUse runs registrations and lookups at
// once (go test -race is the judge).
func TestRegistryIsSafeForConcurrentUse(t *testing.T) {
	r := NewRegistry()
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Add(2)
		a := registered(t, "n", fmt.Sprintf("v%d", i), "x")
		go func() { defer wg.Done(); r.Register(a) }()
		go func() { defer wg.Done(); r.Get("n"); r.Agents() }()
	}
	wg.Wait()
	if len(r.Agents()) != 8 {
		t.Errorf("%d agents registered", len(r.Agents()))
	}
}

// TestRegisteredAgentsServeByName: an agent built in Go is a sub-agent
// ("agent:NAME") and a handoff target of an agent given the registry,
// the same instance, which the user does not close.
func TestRegisteredAgentsServeByName(t *testing.T) {
	r := NewRegistry()
	helper := registered(t, "helper", "v1", "helped", "taken over", "after")
	if err := r.Register(helper); err != nil {
		t.Fatal(err)
	}
	boss := scriptModel(t, `{"turns": [
		{"tool_calls": [{"name": "helper", "arguments": {"task": "help"}}]},
		{"tool_calls": [{"name": "transfer_to_helper", "arguments": {"reason": "yours"}}]}]}`)
	a, err := New(mustSpec(t, `{"agent_name": "boss", "version": "v1", "model_name": "m", "tools": ["agent:helper"], "handoffs": ["helper"]}`),
		WithProvider(boss, "scripted"), WithRegistry(r))
	if err != nil {
		t.Fatal(err)
	}
	res, err := a.Run(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	if res.Steps[0].Observation == "" || !strings.Contains(res.Steps[0].Observation, "helped") || len(res.Handoffs) != 1 || res.Handoffs[0] != "helper@v1" || res.Result != "taken over" {
		t.Errorf("steps %+v handoffs %v", res.Steps, res.Handoffs)
	}
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := helper.Run(context.Background(), nil); err != nil {
		t.Errorf("the registered agent was closed by the one that used it: %v", err)
	}
}

// TestLoadRegistry: an agents directory loads into a registry, every
// version built and registered; a spec that does not build is named.
func TestLoadRegistry(t *testing.T) {
	dir := t.TempDir()
	write := func(name, version, body string) {
		os.MkdirAll(filepath.Join(dir, name), 0o755)
		os.WriteFile(filepath.Join(dir, name, version+".json"), []byte(body), 0o600)
	}
	write("a", "v1", `{"agent_name": "a", "version": "v1", "model_name": "scripted:../a.json", "system_text": "A."}`)
	write("a", "v2", `{"agent_name": "a", "version": "v2", "model_name": "scripted:../a.json", "system_text": "A two."}`)
	write("b", "v1", `{"agent_name": "b", "version": "v1", "model_name": "scripted:../a.json", "system_text": "B.", "tools": ["agent:a"]}`)
	os.WriteFile(filepath.Join(dir, "a.json"), []byte(`{"turns": [{"content": "hi"}]}`), 0o600)
	r, err := LoadRegistry(spec.Dir{Path: dir})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	var refs []string
	for _, a := range r.Agents() {
		refs = append(refs, a.Name()+"@"+a.Spec().Version)
	}
	if strings.Join(refs, " ") != "a@v1 a@v2 b@v1" {
		t.Errorf("registered %v", refs)
	}
	write("c", "v1", `{"agent_name": "c", "version": "v1", "model_name": "scripted:../a.json", "tools": ["nope"]}`)
	if _, err := LoadRegistry(spec.Dir{Path: dir}); !errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), "c@v1") {
		t.Errorf("a spec that does not build: %v", err)
	}
}
