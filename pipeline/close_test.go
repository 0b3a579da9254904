package pipeline

import (
	"context"
	"encoding/json"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/agentry/agentry/tool"
)

var pipeCloses atomic.Int64

func init() {
	tool.RegisterConnector("pipe-counted", func(json.RawMessage, string) ([]tool.Tool, func() error, error) {
		t := tool.Must(tool.Func("held", "A tool of a connector that holds something open.",
			func(context.Context, struct{}) (string, error) { return "ok", nil }, tool.WithIdempotency(tool.Safe)))
		return []tool.Tool{t}, func() error { pipeCloses.Add(1); return nil }, nil
	})
}

// Close closes every stage's agent, and a pipeline that fails to build
// closes the stages it had built.
func TestClose(t *testing.T) {
	stage := func(name string) string {
		return `{"name": "` + name + `", "agent": {"agent_name": "` + name + `", "version": "v1", "mode": "service", "tools": ["held"], "connectors": {"pipe-counted": {}}}}`
	}
	before := pipeCloses.Load()
	p := build(t, `{"pipeline_name": "p", "version": "v1", "stages": [`+stage("a")+`, `+stage("b")+`]}`, nil)
	if n := pipeCloses.Load() - before; n != 0 {
		t.Fatalf("%d closes before Close", n)
	}
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	if n := pipeCloses.Load() - before; n != 2 {
		t.Errorf("Close closed %d stage connectors, want 2", n)
	}

	before = pipeCloses.Load()
	d, err := Parse("test", []byte(`{"pipeline_name": "p", "version": "v1", "stages": [`+stage("a")+`, {"name": "b", "agent": {"agent_name": "b", "version": "v1", "mode": "service", "tools": ["nope"]}}]}`))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := New(d, ".", WithTools(kvTools(t))); err == nil || !strings.Contains(err.Error(), `unknown tool "nope"`) {
		t.Fatalf("New = %v", err)
	}
	if n := pipeCloses.Load() - before; n != 1 {
		t.Errorf("a failed build closed %d connectors, want the one of stage a", n)
	}
}
