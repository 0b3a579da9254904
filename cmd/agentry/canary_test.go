package main

import (
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/agentry/agentry/store"
)

// TestCanarySecrets: a run whose input, tool arguments, tool output,
// model reply and environment each carry a distinct fake secret. None of
// them appears in the stored run, the events file, the JSON result, the
// logs, the progress or the audit log; the tool did receive its secret.
func TestCanarySecrets(t *testing.T) {
	const (
		inInput  = "sk-proj-CANARYinput000000000000001"
		inArgs   = "ghp_CANARYargs0000000000000000000000000002"
		inOutput = "eyJhbGciOiJIUzI1NiJ9.eyJjYW5hcnkiOiJvdXRwdXQifQ.CANARYoutputSignature0003"
		inReply  = "AKIACANARYREPLY00004"
		inEnv    = "canary-env-value-0005"
	)
	t.Setenv("CANARY_SERVICE_TOKEN", inEnv)
	var mu sync.Mutex
	var received []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		received = append(received, r.URL.RawQuery)
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		w.Write([]byte(`{"session": "` + inOutput + `", "env": "` + inEnv + `"}`))
	}))
	defer srv.Close()
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "agent.json"), []byte(`{"agent_name": "canary", "version": "v1", "model_name": "scripted:turns.json",
		"mode": "tools", "system_text": "Fetch the session.", "purpose_text": "${note}", "input_keys": ["note"], "tools": ["http_get", "kv_delete"],
		"policy": {"tools": {"deny": ["kv_delete"]}}}`), 0o600)
	os.WriteFile(filepath.Join(dir, "turns.json"), []byte(`{"turns": [
		{"content": "Fetching.", "tool_calls": [{"name": "http_get", "arguments": {"url": "`+srv.URL+`/s?key=`+inArgs+`"}},
			{"name": "kv_delete", "arguments": {"key": "`+inArgs+`"}}]},
		{"content": "Done; the access key is `+inReply+` and the token `+inEnv+`."}]}`), 0o600)
	db := filepath.Join(dir, "runs.db")
	events := filepath.Join(dir, "events.jsonl")
	code, out, errs := runCLI(t, "run", filepath.Join(dir, "agent.json"), "--input", "note=use "+inInput, "--db", db,
		"--events", events, "--json", "--log-level", "debug", "--log-format", "json", "--allow-private-network")
	if code != 0 {
		t.Fatalf("exit %d\n%s", code, errs)
	}
	mu.Lock() // the handler's writes reach here over TCP, which the race detector does not see
	got := slices.Clone(received)
	mu.Unlock()
	if len(got) != 1 || !strings.Contains(got[0], inArgs) {
		t.Fatalf("the tool did not receive its secret: %v", got)
	}
	ctx := context.Background()
	st, err := store.Open(ctx, db)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	runs, _ := st.List(ctx, store.Filter{})
	if len(runs) != 1 {
		t.Fatalf("%d runs stored", len(runs))
	}
	var stored strings.Builder
	recs, _ := st.Records(ctx, runs[0].ID, 0)
	for _, r := range recs {
		stored.Write(r.Data)
		stored.WriteString(r.Key)
	}
	audit, _ := st.AuditLog(ctx, "")
	if len(audit) == 0 {
		t.Error("the denied call was not audited")
	}
	var auditText strings.Builder
	for _, a := range audit {
		auditText.WriteString(a.Reason + a.Target + a.Rule)
	}
	eventsData, _ := os.ReadFile(events)
	_, traced, _ := runCLI(t, "trace", runs[0].ID, "--db", db, "--json")
	_, tracedText, _ := runCLI(t, "trace", runs[0].ID, "--db", db)
	// Without --json the answer streams to the terminal, with progress.
	code, plainOut, plainErrs := runCLI(t, "run", filepath.Join(dir, "agent.json"), "--input", "note=use "+inInput, "--no-store",
		"--allow-private-network")
	if code != 0 {
		t.Fatalf("exit %d\n%s", code, plainErrs)
	}
	places := map[string]string{"the stored run": stored.String(), "the events file": string(eventsData), "the JSON result": out,
		"the logs and progress": errs, "the audit log": auditText.String(), "trace --json": traced, "trace": tracedText,
		"the streamed answer": plainOut, "the progress": plainErrs}
	for name, text := range places {
		if len(text) < 20 && name != "the audit log" {
			t.Errorf("%s is empty", name)
		}
		for _, secret := range []string{inInput, inArgs, inOutput, inReply, inEnv} {
			if strings.Contains(text, secret) {
				t.Errorf("%s holds the secret %s", name, secret)
			}
		}
	}
	if !strings.Contains(out, "[REDACTED:secret]") {
		t.Error("the JSON result shows no redaction at all")
	}
}

// TestCanaryInTheErrorLine: a model error that quotes a secret is
// redacted in the error line the binary prints last, as everywhere else.
func TestCanaryInTheErrorLine(t *testing.T) {
	const canary = "sk-proj-CANARYerrorline0000000000006"
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "agent.json"), []byte(`{"agent_name": "leaky", "version": "v1",
		"model_name": "scripted:turns.json", "system_text": "Answer.", "retry": {"attempts": 1}}`), 0o600)
	os.WriteFile(filepath.Join(dir, "turns.json"), []byte(`{"turns": [
		{"error": {"status": 401, "message": "invalid key `+canary+`"}}]}`), 0o600)
	code, out, errs := runCLI(t, "run", filepath.Join(dir, "agent.json"), "--no-store", "--json")
	if code != 1 {
		t.Fatalf("exit %d\n%s", code, errs)
	}
	lines := strings.Split(strings.TrimSpace(errs), "\n")
	last := lines[len(lines)-1]
	if !strings.HasPrefix(last, "agentry:") || !strings.Contains(last, "[REDACTED") {
		t.Errorf("the error line %q does not say the error, redacted", last)
	}
	if strings.Contains(errs, canary) || strings.Contains(out, canary) {
		t.Errorf("the secret is printed:\n%s\n%s", errs, out)
	}
}
