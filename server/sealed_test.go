package server

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/agentry/agentry/agent"
)

// TestSealedLogs: with the agents' encryption key, the server reads the
// run logs they seal: the Result, and the event stream from any event
// id; the store holds none of it in the clear. A server without the key
// shows neither.
func TestSealedLogs(t *testing.T) {
	key := []byte("0123456789abcdef0123456789abcdef")
	f := newFixture(t, Config{EncryptionKey: key, AgentOptions: []agent.Option{agent.WithEncryptionKey(key)}})
	code, res := f.do(t, "POST", "/v1/runs?wait=true", "", `{"spec": {"agent_name": "sealed", "version": "v1", "system_text": "Greet.",
		"tools": ["kv_set"]}, "input": {"task": "greet the one named Zoltan"}}`)
	if code != 200 || res["result"] != "Hello, Ada." {
		t.Fatalf("%d %v", code, res)
	}
	id := res["id"].(string)
	if _, run := f.do(t, "GET", "/v1/runs/"+id, "", ""); run["result"] == nil {
		t.Errorf("the sealed run's Result is not shown: %v", run)
	}
	all := f.stream(t, id, 0)
	if len(all) < 5 || all[0].typ != "run_start" || all[len(all)-1].typ != "run_end" {
		t.Fatalf("the sealed run's events: %v", all)
	}
	tail := f.stream(t, id, all[2].id)
	if fmt.Sprint(tail) != fmt.Sprint(all[3:]) {
		t.Errorf("resumed after %d: %v, want %v", all[2].id, tail, all[3:])
	}
	recs, err := f.st.Records(context.Background(), id, 0)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range recs {
		if strings.Contains(string(r.Data), "Zoltan") || strings.Contains(string(r.Data), "Hello, Ada") {
			t.Fatalf("record %d (%s) is in the clear: %s", r.Seq, r.Kind, r.Data)
		}
	}

	// Without the key: nothing of the log shows.
	other, err := New(Config{Store: f.st})
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(other)
	defer func() {
		hs.Close()
		other.Close(context.Background())
	}()
	resp, err := http.Get(hs.URL + "/v1/runs/" + id)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if strings.Contains(string(body), `"result"`) || strings.Contains(string(body), "Hello") {
		t.Errorf("a server without the key shows the Result: %s", body)
	}
	resp, err = http.Get(hs.URL + "/v1/runs/" + id + "/events")
	if err != nil {
		t.Fatal(err)
	}
	body, _ = io.ReadAll(resp.Body)
	resp.Body.Close()
	if strings.Contains(string(body), "event:") || !strings.Contains(string(body), "sealed") {
		t.Errorf("a server without the key streams: %s", body)
	}
}
