package server

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/agentry/agentry/agent"
	"github.com/agentry/agentry/store"
)

// BenchmarkServeRuns: the server's own cost of a run, as the servers
// benchmark loads it: 1,000 runs started at once over HTTP, each two
// turns of a scripted model that takes no time with one kv_set call
// between them, answered with ?wait=true, the run store SQLite on disk
// (":memory:" with -store memory). Its figures are per run; the CPU
// profile of this benchmark is where a run's time goes.
//
//	go test -run '^$' -bench BenchmarkServeRuns -benchtime 3x -cpuprofile cpu.out ./server
func BenchmarkServeRuns(b *testing.B) {
	for _, where := range []string{"sqlite", "memory"} {
		b.Run(where, func(b *testing.B) {
			url, client := benchServer(b, where)
			body := []byte(`{"agent": "adder", "input": {"task": "store 2"}}`)
			const n = 1000
			for b.Loop() {
				all(b, n, func(int) { postJSON(b, client, url+"/v1/runs?wait=true", body, 200) })
			}
			b.ReportMetric(float64(b.Elapsed().Microseconds())/float64(b.N*n), "µs/run")
		})
	}
}

// BenchmarkServeConversations: the same load as the second message of
// 1,000 conversations at once, beside their first (each message two
// turns with a kv_set call between them, answered with ?wait=true): the
// second run starts from what the first said.
//
//	go test -run '^$' -bench BenchmarkServeConversations -benchtime 3x ./server
func BenchmarkServeConversations(b *testing.B) {
	url, client := benchServer(b, "sqlite")
	const n = 1000
	var first, second time.Duration
	for b.Loop() {
		ids := make([]string, n)
		all(b, n, func(i int) {
			out := postJSON(b, client, url+"/v1/conversations", []byte(`{"agent": "chatter"}`), 201)
			ids[i], _ = out["id"].(string)
		})
		start := time.Now()
		all(b, n, func(i int) {
			postJSON(b, client, url+"/v1/conversations/"+ids[i]+"/messages?wait=true", []byte(`{"message": "store 2"}`), 200)
		})
		first += time.Since(start)
		start = time.Now()
		all(b, n, func(i int) {
			out := postJSON(b, client, url+"/v1/conversations/"+ids[i]+"/messages?wait=true", []byte(`{"message": "and 3"}`), 200)
			if out["result"] != "done again" {
				b.Errorf("the second message: %v", out["result"])
			}
		})
		second += time.Since(start)
	}
	b.ReportMetric(float64(first.Microseconds())/float64(b.N*n), "first-µs/run")
	b.ReportMetric(float64(second.Microseconds())/float64(b.N*n), "second-µs/run")
}

// benchServer serves the testdata/served agents over HTTP with a run
// store of where (sqlite on disk, or memory), for a load of 1,000 at once.
func benchServer(b *testing.B, where string) (string, *http.Client) {
	dsn := filepath.Join(b.TempDir(), "runs.db")
	if where == "memory" {
		dsn = ":memory:"
	}
	st, err := store.Open(context.Background(), dsn)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { st.Close() })
	reg := agent.NewRegistry()
	for _, name := range []string{"adder", "chatter"} {
		a, err := agent.FromDir("testdata/served/agents", name, agent.WithTools(kvRegistry(b)))
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { a.Close() })
		if err := reg.Register(a); err != nil {
			b.Fatal(err)
		}
	}
	srv, err := New(Config{Store: st, Agents: reg, MaxRuns: 2000})
	if err != nil {
		b.Fatal(err)
	}
	h := httptest.NewServer(srv)
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 1000}}
	b.Cleanup(func() {
		client.CloseIdleConnections()
		h.Close()
		srv.Close(context.Background())
	})
	return h.URL, client
}

// all runs f for 0..n-1 at once and waits for them.
func all(b *testing.B, n int, f func(i int)) {
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() { f(i) })
	}
	wg.Wait()
}

// postJSON sends body as JSON and reads the answer, which must have status.
func postJSON(b *testing.B, client *http.Client, url string, body []byte, status int) map[string]any {
	resp, err := client.Post(url, "application/json", bytes.NewReader(body))
	if err != nil {
		b.Error(err)
		return nil
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != status {
		b.Errorf("%s: status %d: %s", url, resp.StatusCode, data)
		return nil
	}
	var out map[string]any
	json.Unmarshal(data, &out)
	return out
}
