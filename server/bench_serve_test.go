package server

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"sync"
	"testing"

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
			dsn := filepath.Join(b.TempDir(), "runs.db")
			if where == "memory" {
				dsn = ":memory:"
			}
			st, err := store.Open(context.Background(), dsn)
			if err != nil {
				b.Fatal(err)
			}
			defer st.Close()
			a, err := agent.FromDir("testdata/served/agents", "adder", agent.WithTools(kvRegistry(b)))
			if err != nil {
				b.Fatal(err)
			}
			defer a.Close()
			reg := agent.NewRegistry()
			if err := reg.Register(a); err != nil {
				b.Fatal(err)
			}
			srv, err := New(Config{Store: st, Agents: reg, MaxRuns: 2000})
			if err != nil {
				b.Fatal(err)
			}
			h := httptest.NewServer(srv)
			defer h.Close()
			defer srv.Close(context.Background())
			client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 1000, MaxConnsPerHost: 0}}
			body := []byte(`{"agent": "adder", "input": {"task": "store 2"}}`)
			const n = 1000
			for b.Loop() {
				var wg sync.WaitGroup
				for range n {
					wg.Go(func() {
						resp, err := client.Post(h.URL+"/v1/runs?wait=true", "application/json", bytes.NewReader(body))
						if err != nil {
							b.Error(err)
							return
						}
						io.Copy(io.Discard, resp.Body)
						resp.Body.Close()
						if resp.StatusCode != 200 {
							b.Errorf("status %d", resp.StatusCode)
						}
					})
				}
				wg.Wait()
			}
			b.ReportMetric(float64(b.Elapsed().Microseconds())/float64(b.N*n), "µs/run")
			client.CloseIdleConnections()
		})
	}
}
