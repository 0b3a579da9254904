package main

import (
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestServeConversation drives a conversation over HTTP through the
// binary: its messages remember what was said; it goes on after the
// server restarts and from a second server on the same store; a second
// message while a run goes on is refused, queued or interrupts; another
// user's conversation is not there; a fork goes its own way; a deletion
// leaves nothing of it in the database file.
func TestServeConversation(t *testing.T) {
	dir := t.TempDir()
	agents := filepath.Join(dir, "agents")
	os.MkdirAll(filepath.Join(agents, "chat"), 0o755)
	os.WriteFile(filepath.Join(agents, "chat", "v1.json"), []byte(`{"agent_name": "chat", "version": "v1", "model_name": "scripted:../../turns.json",
		"system_text": "Chat.", "user_text": "${message}", "input_keys": ["message"]}`), 0o600)
	// The script of one conversation: each run goes on where the one
	// before left off. The fourth turn holds (a run to refuse and
	// interrupt messages against), the sixth a moment (one to queue a
	// message behind).
	os.WriteFile(filepath.Join(dir, "turns.json"), []byte(`{"turns": [{"content": "Noted: the-words-of-ada."},
		{"content": "Second answer."}, {"content": "Third answer."}, {"content": "Slow answer.", "delay_ms": 60000},
		{"content": "After the interrupt."}, {"content": "Paused briefly.", "delay_ms": 500}, {"content": "Queued answer."}]}`), 0o600)
	keys := filepath.Join(dir, "keys.json")
	os.WriteFile(keys, []byte(`[{"name": "ada", "sha256": "`+hashOf("ada-key")+`", "role": "runner"},
		{"name": "bob", "sha256": "`+hashOf("bob-key")+`", "role": "runner"}]`), 0o600)
	db := filepath.Join(dir, "runs.db")
	args := []string{"--agents", agents, "--db", db, "--auth-keys", keys}
	s := startServe(t, args...)
	code, conv := s.call(t, "POST", "/v1/conversations", "ada-key", `{"agent": "chat"}`)
	if code != 201 {
		t.Fatalf("create: %d %v\n%s", code, conv, s.out)
	}
	id := conv["id"].(string)
	path := "/v1/conversations/" + id + "/messages"
	say := func(s *served, text string) map[string]any {
		t.Helper()
		code, res := s.call(t, "POST", path+"?wait=true", "ada-key", `{"message": "`+text+`"}`)
		if code != 200 {
			t.Fatalf("%q: %d %v\n%s", text, code, res, s.out)
		}
		return res
	}
	first := say(s, "Remember the-words-of-ada.")
	if code, _ := s.call(t, "GET", "/v1/conversations/"+id, "bob-key", ""); code != 404 {
		t.Errorf("bob reads ada's conversation: %d", code)
	}
	if code, body := s.call(t, "GET", "/v1/conversations", "bob-key", ""); code != 200 || len(body["conversations"].([]any)) != 0 {
		t.Errorf("bob's list: %d %v", code, body)
	}
	s.stop(t)

	// After a restart, and from a second server on the same store, it goes on.
	s = startServe(t, args...)
	second := say(s, "And then?")
	if msgs := second["messages"].([]any); len(msgs) != 5 || msgs[2].(map[string]any)["content"] != "Noted: the-words-of-ada." {
		t.Errorf("after the restart, the run was sent %v", msgs)
	}
	s2 := startServe(t, args...)
	if third := say(s2, "And after that?"); len(third["messages"].([]any)) != 7 {
		t.Errorf("from the second server, the run was sent %v", third["messages"])
	}

	// One run at a time: refused, interrupting, queued.
	code, held := s.call(t, "POST", path, "ada-key", `{"message": "Take your time."}`)
	if code != 201 {
		t.Fatalf("the slow message: %d %v", code, held)
	}
	if code, body := s2.call(t, "POST", path, "ada-key", `{"message": "Now?"}`); code != 409 || body["error"].(map[string]any)["code"] != "conversation_busy" {
		t.Errorf("a second message: %d %v", code, body)
	}
	code, res := s.call(t, "POST", path+"?wait=true", "ada-key", `{"message": "Stop that.", "if_busy": "interrupt"}`)
	if code != 200 || res["result"] != "After the interrupt." {
		t.Errorf("the interrupting message: %d %v", code, res)
	}
	if _, run := s.call(t, "GET", "/v1/runs/"+held["run_id"].(string), "ada-key", ""); run["status"] != "aborted" {
		t.Errorf("the interrupted run: %v", run["status"])
	}
	if code, _ := s.call(t, "POST", path, "ada-key", `{"message": "A moment."}`); code != 201 {
		t.Fatalf("the brief message: %d", code)
	}
	code, res = s2.call(t, "POST", path+"?wait=true", "ada-key", `{"message": "After that?", "if_busy": "queue"}`)
	if msgs, _ := res["messages"].([]any); code != 200 || res["result"] != "Queued answer." || msgs[len(msgs)-3].(map[string]any)["content"] != "Paused briefly." {
		t.Errorf("the queued message: %d %v", code, res)
	}

	// A fork at the first run; then the original is deleted.
	code, fork := s.call(t, "POST", "/v1/conversations/"+id+"/fork", "ada-key", `{"at": "`+first["id"].(string)+`"}`)
	if code != 201 || fork["forked_at"] != first["id"] {
		t.Fatalf("fork: %d %v", code, fork)
	}
	if code, _, body := s.raw(t, "DELETE", "/v1/conversations/"+id, "ada-key"); code != 204 {
		t.Fatalf("delete: %d %s", code, body)
	}
	if code, got := s.call(t, "GET", "/v1/conversations/"+fork["id"].(string), "ada-key", ""); code != 200 || got["forked_from"] != id {
		t.Errorf("the fork after the deletion: %d %v", code, got)
	}
	s.stop(t)
	s2.stop(t)
	// Nothing of the deleted conversation's own runs is in the file: the
	// words of its later runs are gone (the fork keeps the first's).
	for _, f := range []string{db, db + "-wal"} {
		data, _ := os.ReadFile(f)
		for _, words := range []string{"Second answer.", "Third answer.", "And after that?"} {
			if strings.Contains(string(data), words) {
				t.Errorf("%s still holds %q", filepath.Base(f), words)
			}
		}
	}
}

// raw sends a request with no body and answers its status, headers and
// body as they are.
func (s *served) raw(t *testing.T, method, path, key string) (int, http.Header, []byte) {
	t.Helper()
	req, _ := http.NewRequest(method, s.base+path, nil)
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header, body
}
