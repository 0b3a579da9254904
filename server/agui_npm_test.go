package server

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/agentry/agentry/internal/testdb"
)

// aguiSeen is what testdata/agui-client.cjs printed.
type aguiSeen struct {
	Runs []struct {
		Types   []string
		Outcome string
		Result  any
		Error   string
	}
	Pending []struct {
		ID, Reason, ToolCallID string
	}
	PendingAfter int
	Messages     []struct {
		Role       string
		Content    any
		ToolCallID string
		ToolCalls  []struct{ ID, Name, Arguments string }
	}
	State map[string]any
}

// TestAGUINodeClient: the npm AG-UI client (@ag-ui/client, pinned by
// scripts/test-deps.sh), in Node, runs an agent whose tool call waits
// for approval: it sees the thought, the tool call and the run ending
// with an interrupt; it resumes the interrupt with an approval on the
// same thread, and the same agentry run finishes with the call's result
// and the answer. The client accepts every event as it is (it warns of
// any it had to strip), and the run store holds one completed run in the
// thread's session, the approval on record under the key's name.
func TestAGUINodeClient(t *testing.T) {
	modules := testdb.NPM(t, "@ag-ui/client")
	f := newFixture(t, Config{Keys: []Key{{Name: "rui", SHA256: HashKey("run-key"), Role: RoleRunner}}})
	careful(t, f, "careful", 1)
	cmd := exec.Command("node", "testdata/agui-client.cjs", f.http.URL+"/ag-ui/careful@v1", "run-key", "store it")
	cmd.Env = append(os.Environ(), "NODE_PATH="+modules)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("node: %v\n%s", err, stderr.String())
	}
	if strings.Contains(stderr.String(), "[ag-ui]") {
		t.Errorf("the client warned of the events:\n%s", stderr.String())
	}
	var got aguiSeen
	if err := json.Unmarshal(out, &got); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	if len(got.Runs) != 2 {
		t.Fatalf("runs %+v", got.Runs)
	}
	first, second := got.Runs[0], got.Runs[1]
	if first.Outcome != "interrupt" || len(got.Pending) != 1 || got.Pending[0].Reason != "tool_call" || got.Pending[0].ToolCallID != "c1" ||
		!contains(first.Types, "REASONING_MESSAGE_CONTENT", "TOOL_CALL_START", "TOOL_CALL_ARGS", "TOOL_CALL_END", "STATE_SNAPSHOT") ||
		contains(first.Types, "TOOL_CALL_RESULT") {
		t.Errorf("the first run: %+v, pending %+v", first, got.Pending)
	}
	if second.Outcome != "success" || second.Result != "Stored." || got.PendingAfter != 0 || second.Error != "" ||
		!contains(second.Types, "TOOL_CALL_RESULT", "TEXT_MESSAGE_CONTENT") || contains(second.Types, "TOOL_CALL_START") {
		t.Errorf("the resumed run: %+v (pending after: %d)", second, got.PendingAfter)
	}
	if msgs := fmt.Sprintf("%+v", got.Messages); !strings.Contains(msgs, "{ID:c1 Name:kv_set Arguments:{") ||
		!strings.Contains(msgs, `ToolCallID:c1`) || !strings.Contains(msgs, `"stored":true`) ||
		!strings.Contains(msgs, "Role:reasoning Content:Storing.") || !strings.Contains(msgs, "Role:assistant Content:Stored.") {
		t.Errorf("the thread's messages: %s", msgs)
	}
	progress, _ := got.State["agentry"].(map[string]any)
	runID, _ := progress["runId"].(string)
	if got.State["theme"] != "dark" || progress["status"] != "completed" || runID == "" {
		t.Fatalf("the state: %v", got.State)
	}
	if _, run := f.do(t, "GET", "/v1/runs/"+runID, "run-key", ""); run["status"] != "completed" || run["session_id"] != "thread-npm" {
		t.Errorf("the stored run: %v", run)
	}
	if d := decisions(t, f, runID, "run-key"); d != "[approve tool:kv_set by rui]" {
		t.Errorf("decisions on record %s", d)
	}
}

// contains says whether list holds each of want.
func contains(list []string, want ...string) bool {
	for _, w := range want {
		found := false
		for _, s := range list {
			found = found || s == w
		}
		if !found {
			return false
		}
	}
	return true
}
