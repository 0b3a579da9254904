package agent

import (
	"context"
	"strings"
	"testing"

	"github.com/agentry/agentry/internal/testdb"
	"github.com/agentry/agentry/tool"
)

// TestResultNotes: the Result's diagnostics warn of a cut observation,
// retry_info counts the retried model calls and names the last error,
// attachments list what tools attached (redacted), and trace_ref names
// the stored trace.
func TestResultNotes(t *testing.T) {
	report := tool.Must(tool.Func("report", "Write a report.", func(ctx context.Context, in echoArgs) (string, error) {
		tool.CallFrom(ctx).Attach("report", "s3://reports/"+in.Text+".pdf")
		tool.CallFrom(ctx).Attach("token", "sk-proj-CANARYattach00000000000000009")
		return strings.Repeat("r", 500), nil
	}, tool.WithIdempotency(tool.Safe)))
	m := scriptModel(t, `{"turns": [
		{"error": {"status": 503, "message": "busy now"}},
		{"tool_calls": [{"name": "report", "arguments": {"text": "q3"}}]},
		{"content": "written"}]}`)
	a := newTestAgent(t, `{"agent_name": "n", "version": "v1", "model_name": "m", "tools": ["report"],
		"limits": {"max_observation_bytes": 100}, "retry": {"initial_backoff_ms": 1, "max_backoff_ms": 1}}`, m, report)
	st := openStore(t, testdb.SQLite(t))
	res, err := a.Run(context.Background(), nil, WithStore(st))
	if err != nil {
		t.Fatal(err)
	}
	if res.Diagnostics == nil || len(res.Diagnostics.Warnings) != 1 || !strings.Contains(res.Diagnostics.Warnings[0], "report") {
		t.Errorf("diagnostics %+v", res.Diagnostics)
	}
	if res.RetryInfo == nil || res.RetryInfo.Attempts != 1 || !strings.Contains(res.RetryInfo.LastError, "busy now") {
		t.Errorf("retry info %+v", res.RetryInfo)
	}
	if res.Attachments["report"] != "s3://reports/q3.pdf" || strings.Contains(res.Attachments["token"], "CANARY") {
		t.Errorf("attachments %v", res.Attachments)
	}
	if res.TraceRef != res.ID {
		t.Errorf("trace_ref %q", res.TraceRef)
	}
	// A run without any has none.
	plain, _ := newTestAgent(t, `{"agent_name": "p", "version": "v1", "model_name": "m"}`, &recorder{replies: []reply{answer("ok")}}).Run(context.Background(), nil)
	if plain.Diagnostics != nil || plain.RetryInfo != nil || plain.Attachments != nil || plain.TraceRef != "" {
		t.Errorf("notes on a plain run: %+v %+v %v %q", plain.Diagnostics, plain.RetryInfo, plain.Attachments, plain.TraceRef)
	}
}
