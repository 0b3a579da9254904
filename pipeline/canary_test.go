package pipeline

import (
	"context"
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentry/agentry/agent"
	"github.com/agentry/agentry/event"
	"github.com/agentry/agentry/llm/scripted"
	"github.com/agentry/agentry/memory"
	"github.com/agentry/agentry/memory/inmem"
	"github.com/agentry/agentry/store"
	"github.com/agentry/agentry/tool"
)

// A pipeline whose input, stage tool output (in clear and JSON-escaped),
// tool hints, memory write and environment each carry a distinct fake
// secret. None of them appears in the pipeline's stored records or its
// stage's, its events, its Result (decoded or as JSON), the audit log or
// the memory; the tool did receive its input's secret.
func TestCanarySecretsInPipelines(t *testing.T) {
	const (
		inInput   = "sk-proj-CANARYpipelineInput000001"
		inEscaped = "ghp_CANARYescapedOutput00000000000000000002"
		inHint    = "AKIACANARYHINT000003"
		inAlt     = "xoxb-CANARY-alternative-0004"
		inEnv     = "canary-env-7Hq2-value-0005"
		inMemory  = "sk_live_CANARYmemoryWrite0006"
	)
	t.Setenv("CANARY_PIPELINE_TOKEN", inEnv)
	var received string
	escaped := strings.ReplaceAll(inEscaped, "g", `\u0067`) // "\u0067hp_…" decodes to "ghp_…"
	peek := tool.Must(tool.New(tool.Info{Name: "peek", Description: "Peek at the vault.", Idempotency: tool.Safe,
		Parameters: json.RawMessage(`{"type": "object", "properties": {"q": {"type": "string"}}}`)},
		func(_ context.Context, args json.RawMessage) (json.RawMessage, error) {
			received = string(args)
			return json.RawMessage(`{"found": "` + escaped + `", "env": "` + inEnv + `", "agent_hints": {"risk_factors": ["uses ` + inHint +
				`"], "alternatives": [{"approach": "rotate ` + inAlt + `", "confidence": 0.4, "pros": ["` + inHint + `"]}]}}`), nil
		}))
	tools, _ := tool.NewRegistry(peek)
	script, err := scripted.Parse("canary", []byte(`{"turns": [
		{"tool_calls": [{"name": "peek", "arguments": {"q": "`+inInput+`"}}]},
		{"content": "{\"summary\": \"stored `+inMemory+`\"}"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	mem := inmem.New()
	d, err := Parse("canary", []byte(`{"pipeline_name": "canary", "version": "v1", "start": "look",
		"stages": [{"name": "look", "output_key": "look", "default_next": "end", "agent": {
			"agent_name": "looker", "version": "v1", "model_name": "x", "mode": "tools", "system_text": "Look.", "purpose_text": "${task}",
			"input_keys": ["task"], "tools": ["peek"], "output_schema": {"type": "object", "properties": {"summary": {"type": "string"}}},
			"memory": {"stream": "vault", "write": ["final_answer", "input"]}}}]}`))
	if err != nil {
		t.Fatal(err)
	}
	p, err := New(d, ".", WithTools(tools), WithAgentOptions(agent.WithProvider(script.Model(), "scripted"), agent.WithMemory(mem)))
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	ctx := context.Background()
	st, err := store.Open(ctx, filepath.Join(t.TempDir(), "runs.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	var events strings.Builder
	res, err := p.Run(ctx, map[string]any{"task": "find " + inInput}, WithStore(st), WithEvents(func(e event.Event) {
		b, _ := json.Marshal(e)
		events.Write(b)
	}, event.Block()))
	if err != nil || !res.Success {
		t.Fatalf("run: %v", err)
	}
	if !strings.Contains(received, inInput) {
		t.Fatalf("the tool did not receive its secret: %s", received)
	}
	var stored strings.Builder
	runs, _ := st.List(ctx, store.Filter{})
	if len(runs) != 2 {
		t.Fatalf("%d runs stored; want the pipeline's and its stage's", len(runs))
	}
	for _, r := range runs {
		recs, _ := st.Records(ctx, r.ID, 0)
		for _, rec := range recs {
			stored.Write(rec.Data)
			stored.WriteString(decodeAll(t, rec.Data)) // JSON kept in strings (a tool's output) decoded too
		}
		audit, _ := st.AuditLog(ctx, r.ID)
		for _, a := range audit {
			stored.WriteString(a.Reason + a.Target + a.Rule)
		}
	}
	var memText strings.Builder
	entries, _ := mem.Memory().Read(ctx, "vault", memory.ReadOptions{})
	for _, e := range entries {
		memText.WriteString(e.Text)
	}
	asJSON, _ := json.Marshal(res)
	decoded := decodeAll(t, asJSON)
	places := map[string]string{"the stored records": stored.String(), "the events": events.String(),
		"the Result as JSON": string(asJSON), "the Result decoded": decoded, "the memory": memText.String()}
	for name, text := range places {
		if len(text) < 20 {
			t.Errorf("%s is empty", name)
		}
		for _, secret := range []string{inInput, inEscaped, inHint, inAlt, inEnv, inMemory} {
			if strings.Contains(text, secret) {
				t.Errorf("%s holds the secret %s", name, secret)
			}
		}
	}
	if !strings.Contains(decoded, "[REDACTED:secret]") {
		t.Error("the Result shows no redaction at all")
	}
}

// decodeAll is every string of a JSON document, decoded (escapes
// resolved), one a line.
func decodeAll(t *testing.T, doc []byte) string {
	t.Helper()
	var v any
	if err := json.Unmarshal(doc, &v); err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	var walk func(any)
	walk = func(v any) {
		switch x := v.(type) {
		case string:
			b.WriteString(x + "\n")
			// A string that holds JSON (an observation) is decoded too.
			var inner any
			if json.Unmarshal([]byte(x), &inner) == nil {
				walk(inner)
			}
		case map[string]any:
			for _, y := range x {
				walk(y)
			}
		case []any:
			for _, y := range x {
				walk(y)
			}
		}
	}
	walk(v)
	return b.String()
}
