package main

import (
	"encoding/hex"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	colmetric "go.opentelemetry.io/proto/otlp/collector/metrics/v1"
	coltrace "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/proto"
)

// otlpReceiver is an OTLP/HTTP receiver on loopback: it decodes what the
// binary exports with the protocol's own message types.
type otlpReceiver struct {
	mu      sync.Mutex
	spans   []*tracepb.Span
	metrics []string // metric names
	bodies  [][]byte // every request as it came
}

func (rc *otlpReceiver) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(r.Body)
	if err != nil || r.Header.Get("Content-Type") != "application/x-protobuf" {
		http.Error(w, "want an application/x-protobuf body", http.StatusBadRequest)
		return
	}
	rc.mu.Lock()
	defer rc.mu.Unlock()
	rc.bodies = append(rc.bodies, body)
	switch r.URL.Path {
	case "/v1/traces":
		var req coltrace.ExportTraceServiceRequest
		if err := proto.Unmarshal(body, &req); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		for _, rs := range req.ResourceSpans {
			for _, ss := range rs.ScopeSpans {
				rc.spans = append(rc.spans, ss.Spans...)
			}
		}
		b, _ := proto.Marshal(&coltrace.ExportTraceServiceResponse{})
		w.Write(b)
	case "/v1/metrics":
		var req colmetric.ExportMetricsServiceRequest
		if err := proto.Unmarshal(body, &req); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		for _, rm := range req.ResourceMetrics {
			for _, sm := range rm.ScopeMetrics {
				for _, m := range sm.Metrics {
					rc.metrics = append(rc.metrics, m.Name)
				}
			}
		}
		b, _ := proto.Marshal(&colmetric.ExportMetricsServiceResponse{})
		w.Write(b)
	default:
		http.NotFound(w, r)
	}
}

func attrOf(s *tracepb.Span, key string) *commonpb.AnyValue {
	for _, kv := range s.Attributes {
		if kv.Key == key {
			return kv.Value
		}
	}
	return nil
}

// TestOTLPExport: a run of the binary with the standard OTEL_* variables
// exports its spans and metrics to an OTLP/HTTP receiver: the GenAI
// conventions' span names, the Result's trace id and token counts, the
// messages when content capture is on, and never the secrets the run
// handled.
func TestOTLPExport(t *testing.T) {
	const secret = "sk-proj-CANARYotlp000000000000000000001"
	rc := &otlpReceiver{}
	col := httptest.NewServer(rc)
	defer col.Close()
	var toolMu sync.Mutex
	toolCalls := 0
	api := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		toolMu.Lock()
		toolCalls++
		toolMu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		w.Write([]byte(`{"token": "` + secret + `"}`))
	}))
	defer api.Close()
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "agent.json"), []byte(`{"agent_name": "otel", "version": "v3", "model_name": "scripted:turns.json",
		"mode": "tools", "system_text": "Fetch.", "purpose_text": "${note}", "input_keys": ["note"], "tools": ["http_get"]}`), 0o600)
	os.WriteFile(filepath.Join(dir, "turns.json"), []byte(`{"turns": [
		{"content": "Fetching.", "tool_calls": [{"name": "http_get", "arguments": {"url": "`+api.URL+`/t"}}], "usage": {"prompt_tokens": 40, "completion_tokens": 7}},
		{"content": "Done: `+secret+`.", "usage": {"prompt_tokens": 60, "completion_tokens": 9}}]}`), 0o600)
	code, out, errs := runEnv(t, []string{"OTEL_EXPORTER_OTLP_ENDPOINT=" + col.URL, "OTEL_SERVICE_NAME=otel-test",
		"OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT=true"},
		"run", filepath.Join(dir, "agent.json"), "--input", "note=use "+secret, "--no-store", "--json", "--quiet", "--allow-private-network")
	if code != 0 {
		t.Fatalf("exit %d\n%s", code, errs)
	}
	var res struct {
		TraceID    string `json:"trace_id"`
		TokenUsage struct {
			Prompt     int `json:"prompt_tokens"`
			Completion int `json:"completion_tokens"`
		} `json:"token_usage"`
	}
	if err := json.Unmarshal([]byte(out), &res); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	rc.mu.Lock() // the receiver's writes reach here over TCP, which the race detector does not see
	defer rc.mu.Unlock()
	names := map[string]*tracepb.Span{}
	var in, outTok int64
	for _, s := range rc.spans {
		names[s.Name] = s
		if strings.HasPrefix(s.Name, "chat ") {
			in += attrOf(s, "gen_ai.usage.input_tokens").GetIntValue()
			outTok += attrOf(s, "gen_ai.usage.output_tokens").GetIntValue()
		}
	}
	run, chat, tool := names["invoke_agent otel"], names["chat turns.json"], names["execute_tool http_get"]
	if run == nil || chat == nil || tool == nil {
		t.Fatalf("spans received: %v", names)
	}
	if got := attrOf(run, "gen_ai.agent.version").GetStringValue(); got != "v3" {
		t.Errorf("gen_ai.agent.version %q", got)
	}
	if tid := hex.EncodeToString(run.TraceId); tid != res.TraceID || res.TraceID == "" {
		t.Errorf("the span's trace %s, the Result's %q", tid, res.TraceID)
	}
	if in != int64(res.TokenUsage.Prompt) || outTok != int64(res.TokenUsage.Completion) || in != 100 {
		t.Errorf("chat spans count %d+%d tokens, the Result %+v", in, outTok, res.TokenUsage)
	}
	if attrOf(chat, "gen_ai.input.messages") == nil || attrOf(tool, "gen_ai.tool.call.result") == nil {
		t.Errorf("content capture is on, and the spans carry no messages")
	}
	hasMetric := map[string]bool{}
	for _, m := range rc.metrics {
		hasMetric[m] = true
	}
	for _, m := range []string{"gen_ai.client.token.usage", "gen_ai.client.operation.duration", "agentry.agent.runs"} {
		if !hasMetric[m] {
			t.Errorf("metric %s not received (got %v)", m, rc.metrics)
		}
	}
	for _, b := range rc.bodies {
		if strings.Contains(string(b), "CANARYotlp") {
			t.Fatalf("an export carries the secret")
		}
	}
	if toolMu.Lock(); toolCalls != 1 {
		t.Errorf("the tool was called %d times", toolCalls)
	}
	toolMu.Unlock()
}

// TestOTLPServe: agentry serve exports too: a run created over HTTP with
// a traceparent is exported as a span of the caller's trace, a child of
// the caller's span, flushed when the server stops.
func TestOTLPServe(t *testing.T) {
	rc := &otlpReceiver{}
	col := httptest.NewServer(rc)
	defer col.Close()
	dir := t.TempDir()
	os.MkdirAll(filepath.Join(dir, "agents", "hello"), 0o755)
	os.WriteFile(filepath.Join(dir, "agents", "hello", "v1.json"), []byte(`{"agent_name": "hello", "version": "v1",
		"model_name": "scripted:../../turns.json", "system_text": "Greet."}`), 0o600)
	os.WriteFile(filepath.Join(dir, "turns.json"), []byte(`{"turns": [{"content": "Hello.", "usage": {"prompt_tokens": 5, "completion_tokens": 2}}]}`), 0o600)
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", col.URL)
	s := startServe(t, "--agents", filepath.Join(dir, "agents"), "--db", filepath.Join(dir, "runs.db"))
	req, _ := http.NewRequest("POST", s.base+"/v1/runs?wait=true", strings.NewReader(`{"agent": "hello"}`))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Traceparent", "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01")
	req.Header.Set("Tracestate", "vendor=a")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("%d\n%s", resp.StatusCode, s.out)
	}
	s.stop(t)
	rc.mu.Lock() // the receiver's writes reach here over TCP, which the race detector does not see
	defer rc.mu.Unlock()
	var run *tracepb.Span
	for _, sp := range rc.spans {
		if sp.Name == "invoke_agent hello" {
			run = sp
		}
	}
	if run == nil {
		t.Fatalf("no run span exported: %d spans", len(rc.spans))
	}
	if hex.EncodeToString(run.TraceId) != "4bf92f3577b34da6a3ce929d0e0e4736" || hex.EncodeToString(run.ParentSpanId) != "00f067aa0ba902b7" {
		t.Errorf("the run's span is in trace %x under %x, not the caller's", run.TraceId, run.ParentSpanId)
	}
	if run.TraceState != "vendor=a" {
		t.Errorf("the run's span has tracestate %q, want the caller's", run.TraceState)
	}
}
