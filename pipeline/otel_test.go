package pipeline

import (
	"context"
	"testing"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
)

// TestSpans: a pipeline run is an invoke_workflow span whose children
// are its stages' invoke_agent spans, one per hop, in the path taken;
// the Result names the span's trace.
func TestSpans(t *testing.T) {
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	defer tp.Shutdown(context.Background())
	p := build(t, abcDef(), map[string][]map[string]any{
		"a": {{"route": map[string]any{"to": "c"}}}, "c": {{"y": 2}}}, WithTracerProvider(tp))
	defer p.Close()
	res, err := p.Run(context.Background(), map[string]any{"task": "t"})
	if err != nil {
		t.Fatal(err)
	}
	var root sdktrace.ReadOnlySpan
	var children []string
	for _, s := range rec.Ended() {
		if s.Name() == "invoke_workflow p" {
			root = s
		}
	}
	if root == nil {
		t.Fatalf("no invoke_workflow span among %v", rec.Ended())
	}
	for _, s := range rec.Ended() {
		if s.Parent().SpanID() == root.SpanContext().SpanID() {
			children = append(children, s.Name())
		}
	}
	if len(children) != 2 || children[0] != "invoke_agent a" || children[1] != "invoke_agent c" {
		t.Errorf("the workflow's children are %v, want the stages a then c", children)
	}
	attrs := map[string]string{}
	for _, kv := range root.Attributes() {
		attrs[string(kv.Key)] = kv.Value.Emit()
	}
	if attrs["gen_ai.operation.name"] != "invoke_workflow" || attrs["gen_ai.workflow.name"] != "p" || attrs["agentry.run_id"] != res.ID {
		t.Errorf("workflow attributes %v", attrs)
	}
	if res.TraceID != root.SpanContext().TraceID().String() {
		t.Errorf("the Result's trace id %q is not the span's %s", res.TraceID, root.SpanContext().TraceID())
	}
}
