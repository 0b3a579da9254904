package main

import (
	"database/sql"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// policyAgent writes the quickstart's agent with policy added.
func policyAgent(t *testing.T, policy string) string {
	t.Helper()
	data, err := os.ReadFile(quickstart)
	if err != nil {
		t.Fatal(err)
	}
	var sp map[string]any
	json.Unmarshal(data, &sp)
	var p any
	if err := json.Unmarshal([]byte(policy), &p); err != nil {
		t.Fatal(err)
	}
	sp["policy"] = p
	abs, _ := filepath.Abs(filepath.Join(filepath.Dir(quickstart), "model.json"))
	sp["model_name"] = "scripted:" + abs
	out, _ := json.Marshal(sp)
	path := filepath.Join(t.TempDir(), "agent.json")
	os.WriteFile(path, out, 0o600)
	return path
}

// Through the binary: a rate limit that waits (the quickstart's two
// parallel kv_set) and one that blocks (its second kv_get, whose token
// comes after the run's deadline).
func TestRateLimitsThroughTheBinary(t *testing.T) {
	for _, tc := range []struct{ name, policy, decision, blocked string }{
		{"waits", `{"rate_limits": {"kv_set": {"per_second": 5}}}`, "wait", ""},
		{"blocks", `{"rate_limits": {"kv_get": {"per_minute": 1}}}`, "block", "kv_get"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			db := filepath.Join(t.TempDir(), "runs.db")
			code, out, errs := runCLI(t, "run", policyAgent(t, tc.policy), "--input", "city=Lisbon", "--input", "days=3", "--db", db, "--json", "-q")
			if code != 0 {
				t.Fatalf("exit %d\n%s", code, errs)
			}
			if got := strings.Count(out, `\"type\":\"rate_limited\"`); (tc.blocked != "") != (got > 0) {
				t.Errorf("%d calls rate_limited, want some: %v", got, tc.blocked != "")
			}
			code, out, _ = runCLI(t, "audit", "--db", db, "--json")
			var recs []struct{ Rule, Decision string }
			json.Unmarshal([]byte(out), &recs)
			if code != 0 || len(recs) == 0 || recs[0].Decision != tc.decision || !strings.HasPrefix(recs[0].Rule, "rate_limits.") {
				t.Errorf("audit: %s", out)
			}
		})
	}
}

// Through the binary: a denied tool and a glob are policy_violation
// observations, and the run goes on; the decisions are audited in the
// store.
func TestPolicyThroughTheBinary(t *testing.T) {
	for _, tc := range []struct{ name, policy, blocked string }{
		{"denied tool", `{"tools": {"deny": ["kv_list"]}}`, "kv_list"},
		{"glob", `{"tools": {"allow": ["kv_set", "kv_l*"]}}`, "kv_get"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			db := filepath.Join(t.TempDir(), "runs.db")
			code, out, errs := runCLI(t, "run", policyAgent(t, tc.policy), "--input", "city=Lisbon", "--input", "days=3", "--db", db, "--json")
			if code != 0 {
				t.Fatalf("exit %d\n%s", code, errs)
			}
			var res struct {
				Steps []struct {
					Observation string
					Action      struct{ Tool string }
				}
			}
			json.Unmarshal([]byte(out), &res)
			blocked := 0
			for _, s := range res.Steps {
				if strings.Contains(s.Observation, "policy_violation") {
					if s.Action.Tool != tc.blocked {
						t.Errorf("%s was blocked, want only %s", s.Action.Tool, tc.blocked)
					}
					blocked++
				}
			}
			if blocked == 0 || !strings.Contains(errs, "policy_violation") {
				t.Errorf("no call was blocked:\n%s", errs)
			}
			code, out, _ = runCLI(t, "audit", "--db", db, "--json")
			var recs []struct {
				Rule, Decision, Target string
			}
			if code != 0 || json.Unmarshal([]byte(out), &recs) != nil || len(recs) != blocked || recs[0].Target != "tool:"+tc.blocked {
				t.Errorf("audit --json: exit %d, %d records for %d blocked calls\n%s", code, len(recs), blocked, out)
			}
			code, out, _ = runCLI(t, "audit", "--db", db, "--verify")
			if code != 0 || !strings.Contains(out, "the audit chain holds") {
				t.Errorf("audit --verify: exit %d %s", code, out)
			}
		})
	}
}

func TestMalformedPolicy(t *testing.T) {
	for _, tc := range []struct{ name, policy, want string }{
		{"unknown field", `{"tools": {"deny": ["x"], "block": ["y"]}}`, `"policy.tools.block"`},
		{"bad glob", `{"tools": {"deny": ["sh[ell"]}}`, `policy.tools.deny[0]`},
		{"bad regex", `{"content_filters": [{"name": "f", "pattern": "(", "on": ["output"], "action": "block"}]}`, "policy.content_filters[0].pattern"},
		{"bad rate", `{"rate_limits": {"kv_set": {"per_second": -2}}}`, "policy.rate_limits.kv_set"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, _, errs := runCLI(t, "run", policyAgent(t, tc.policy), "--input", "city=Lisbon", "--input", "days=3", "--no-store")
			if code != 2 || !strings.Contains(errs, tc.want) {
				t.Errorf("exit %d, %s; want 2 naming %s", code, errs, tc.want)
			}
		})
	}
}

// An audit chain edited, or with a record removed from its middle or its
// end, behind agentry's back is named by audit --verify.
func TestAuditVerifyFindsAnEdit(t *testing.T) {
	for _, tc := range []struct {
		name, sql string
		want      []string
	}{
		{"edited", `UPDATE agentry_audit SET decision = 'allow' WHERE seq = 2`, []string{"record 2", "was changed"}},
		{"removed", `DELETE FROM agentry_audit WHERE seq = 2`, []string{"record 3", "removed or changed"}},
		{"cut", `DELETE FROM agentry_audit WHERE seq = (SELECT MAX(seq) FROM agentry_audit)`, []string{"removed from the end"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			db := filepath.Join(t.TempDir(), "runs.db")
			if code, _, errs := runCLI(t, "run", policyAgent(t, `{"tools": {"deny": ["kv_*"]}}`), "--input", "city=Lisbon", "--input", "days=3", "--db", db, "-q"); code != 0 {
				t.Fatal(errs)
			}
			if code, _, errs := runCLI(t, "audit", "--db", db, "--verify"); code != 0 {
				t.Fatalf("audit --verify of an untouched chain: exit %d %s", code, errs)
			}
			st, err := openStore(t.Context(), db)
			if err != nil {
				t.Fatal(err)
			}
			var n int
			sqlDB := st.(interface{ SQL() *sql.DB }).SQL()
			if err := sqlDB.QueryRow(`SELECT COUNT(*) FROM agentry_audit`).Scan(&n); err != nil || n < 3 {
				t.Fatalf("%d audit records (%v); the test needs 3", n, err)
			}
			_, err = sqlDB.Exec(tc.sql)
			st.Close()
			if err != nil {
				t.Fatal(err)
			}
			code, _, errs := runCLI(t, "audit", "--db", db, "--verify")
			for _, w := range tc.want {
				if code != 1 || !strings.Contains(errs, w) {
					t.Errorf("audit --verify: exit %d %s; want %q", code, errs, w)
				}
			}
			if code, out, _ := runCLI(t, "audit", "--db", db); code != 0 || !strings.Contains(out, "tools.deny") {
				t.Errorf("audit: exit %d\n%s", code, out)
			}
		})
	}
}

// Through the binary: a call the approval rule names pauses the run (exit
// 1, the call named); resume --approve runs it, resume --deny --reason
// tells the model why.
func TestApprovalThroughTheBinary(t *testing.T) {
	for _, decide := range []string{"approve", "deny"} {
		t.Run(decide, func(t *testing.T) {
			db := filepath.Join(t.TempDir(), "runs.db")
			code, out, errs := runCLI(t, "run", policyAgent(t, `{"approval": {"tools": ["kv_list"]}}`), "--input", "city=Lisbon",
				"--input", "days=3", "--db", db, "--json", "-q")
			var res struct {
				ID              string `json:"id"`
				TerminateReason string `json:"terminate_reason"`
			}
			json.Unmarshal([]byte(out), &res)
			if code != 3 || res.TerminateReason != "awaiting_approval" || !strings.Contains(errs, "call_2_1") {
				t.Fatalf("run: exit %d %s\n%s", code, res.TerminateReason, errs)
			}
			args := []string{"resume", res.ID, "--db", db, "--json", "-q"}
			if decide == "approve" {
				args = append(args, "--approve", "call_2_1")
			} else {
				args = append(args, "--deny", "call_2_1", "--reason", "listing is not needed")
			}
			code, out, errs = runCLI(t, args...)
			if code != 0 {
				t.Fatalf("resume --%s: exit %d\n%s", decide, code, errs)
			}
			denied := strings.Contains(out, "listing is not needed")
			if denied != (decide == "deny") {
				t.Errorf("resume --%s: the reason in the result: %v", decide, denied)
			}
			code, out, _ = runCLI(t, "audit", "--db", db, "--run", res.ID)
			if code != 0 || !strings.Contains(out, "pause") || !strings.Contains(out, decide) {
				t.Errorf("audit:\n%s", out)
			}
		})
	}
	if code, _, errs := runCLI(t, "resume", "run_x", "--reason", "why"); code != 2 || !strings.Contains(errs, "--reason says why calls are denied") {
		t.Errorf("--reason without --deny: exit %d %s", code, errs)
	}
}

// Through the binary: policy.network lets one agent reach a private
// address without --allow-private-network, and allow_hosts refuses a
// host outside it.
func TestNetworkPolicyThroughTheBinary(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.Write([]byte(`{"release": "1.2.0"}`))
	}))
	defer srv.Close()
	for _, tc := range []struct{ name, network, want string }{
		{"no policy", ``, `private, loopback`},
		{"allow_private", `, "policy": {"network": {"allow_private": true}}`, `1.2.0`},
		{"host outside allow_hosts", `, "policy": {"network": {"allow_hosts": ["api.example.com"], "allow_private": true}}`,
			`not among the hosts the policy allows`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			os.WriteFile(filepath.Join(dir, "agent.json"), []byte(`{"agent_name": "checker", "version": "v1",
				"model_name": "scripted:turns.json", "system_text": "Check the release.", "tools": ["http_get"]`+tc.network+`}`), 0o600)
			os.WriteFile(filepath.Join(dir, "turns.json"), []byte(`{"turns": [
				{"tool_calls": [{"name": "http_get", "arguments": {"url": "`+srv.URL+`/release"}}]},
				{"content": "Checked."}]}`), 0o600)
			code, out, errs := runCLI(t, "run", filepath.Join(dir, "agent.json"), "--no-store", "--json", "-q")
			if code != 0 || !strings.Contains(out, tc.want) {
				t.Errorf("exit %d, want %q in the result\n%s\n%s", code, tc.want, out, errs)
			}
		})
	}
}

// Through the binary: content filters on tool input, block and redact.
func TestInputFiltersThroughTheBinary(t *testing.T) {
	for _, tc := range []struct{ name, action, want string }{
		{"block", "block", `the content filter city found what it blocks in the input of kv_set`},
		{"redact", "redact", `[REDACTED:city]`}, // kv_get reads back what kv_set was given
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := `{"content_filters": [{"name": "city", "pattern": "Lisbon", "on": ["tool_input"], "action": "` + tc.action + `"}]}`
			code, out, errs := runCLI(t, "run", policyAgent(t, p), "--input", "city=Lisbon", "--input", "days=3", "--no-store", "--json", "-q")
			if code != 0 || !strings.Contains(out, tc.want) {
				t.Errorf("exit %d, want %q in the result\n%s", code, tc.want, errs)
			}
		})
	}
}

// Through the binary: content filters on the output.
func TestOutputFiltersThroughTheBinary(t *testing.T) {
	for _, tc := range []struct {
		name, action string
		code         int
		want, not    string
	}{
		{"block", "block", 1, `"code": "policy_violation"`, "Alfama"},
		{"redact", "redact", 0, "[REDACTED:sights]", "Alfama"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := `{"content_filters": [{"name": "sights", "pattern": "Alfama", "on": ["output"], "action": "` + tc.action + `"}]}`
			events := filepath.Join(t.TempDir(), "events.jsonl")
			code, out, errs := runCLI(t, "run", policyAgent(t, p), "--input", "city=Lisbon", "--input", "days=3", "--no-store", "--json",
				"--events", events)
			data, _ := os.ReadFile(events)
			if code != tc.code || !strings.Contains(out, tc.want) || strings.Contains(out, tc.not) || strings.Contains(string(data), tc.not) ||
				strings.Contains(errs, tc.not) {
				t.Errorf("exit %d (want %d), want %q and no %q in the result, events and progress\n%s\n%s", code, tc.code, tc.want, tc.not, out, errs)
			}
		})
	}
}
