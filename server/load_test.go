package server

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentry/agentry/agent"
	"github.com/agentry/agentry/llm"
	"github.com/agentry/agentry/spec"
	"github.com/agentry/agentry/store"
)

// loadModel is a model whose turns take a time known to the client: run
// n's first turn (a tool call) takes delay(n, 1), its second (the answer)
// delay(n, 2), each between lo and hi.
type loadModel struct{ lo, hi time.Duration }

func (m loadModel) delay(n, turn int) time.Duration {
	span := int64(m.hi-m.lo) + 1
	return m.lo + time.Duration((int64(n)*7919+int64(turn)*104729)%span)
}

func (m loadModel) Generate(ctx context.Context, req *llm.Request) (*llm.Response, error) {
	var n int
	fmt.Sscanf(req.Messages[len(req.Messages)-1].Content, "run %d", &n)
	turn := 1
	if req.Messages[len(req.Messages)-1].Role == llm.RoleTool {
		for _, msg := range req.Messages {
			if msg.Role == llm.RoleUser {
				fmt.Sscanf(msg.Content, "run %d", &n)
			}
		}
		turn = 2
	}
	t := time.NewTimer(m.delay(n, turn))
	defer t.Stop()
	select {
	case <-ctx.Done():
		return nil, ctx.Err()
	case <-t.C:
	}
	u := llm.Usage{PromptTokens: 20, CompletionTokens: 5, TotalTokens: 25}
	if turn == 1 {
		return &llm.Response{ToolCalls: []llm.ToolCall{{ID: "c1", Name: "kv_set", Arguments: json.RawMessage(`{"key": "k", "value": "v"}`)}}, Usage: u}, nil
	}
	return &llm.Response{Content: "done", Usage: u}, nil
}

// loadResult is what a load run measured.
type loadResult struct {
	overheads []time.Duration // per run: its wall time less its model's
	events    int             // read by the subscribers
	watched   int             // the runs whose streams were read
	cut       int             // streams that did not end with run_end
}

// runLoad runs n concurrent runs over HTTP and returns the server's
// overhead per run: every watchEvery-th run's client follows its events
// live from its 201 to its run_end; the others wait for their Result.
func runLoad(tb testing.TB, n, watchEvery int, m loadModel) loadResult {
	tb.Helper()
	ctx := context.Background()
	st, err := store.Open(ctx, filepath.Join(tb.TempDir(), "runs.db"))
	if err != nil {
		tb.Fatal(err)
	}
	defer st.Close()
	r := kvRegistry(tb)
	a, err := agent.New(&spec.Spec{AgentName: "load", Version: "v1", SystemText: "Work.", Tools: []string{"kv_set"}},
		agent.WithProvider(m, "load"), agent.WithTools(r))
	if err != nil {
		tb.Fatal(err)
	}
	defer a.Close()
	reg := agent.NewRegistry()
	if err := reg.Register(a); err != nil {
		tb.Fatal(err)
	}
	srv, err := New(Config{Store: st, Agents: reg, MaxRuns: n})
	if err != nil {
		tb.Fatal(err)
	}
	hs := httptest.NewServer(srv)
	defer func() {
		hs.Close()
		srv.Close(ctx)
	}()
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: n}}
	defer client.CloseIdleConnections()

	var res loadResult
	var mu sync.Mutex
	var runs sync.WaitGroup
	for i := range n {
		runs.Go(func() {
			body := fmt.Sprintf(`{"agent": "load", "input": {"task": "run %d"}}`, i)
			watched := i%watchEvery == 0
			start := time.Now()
			var ok, ended bool
			var events int
			if watched {
				// Its client follows it live, from its 201 to its run_end.
				ok, events, ended = createAndWatch(tb, client, hs.URL, body)
			} else {
				ok = createAndWait(tb, client, hs.URL, body)
			}
			wall := time.Since(start)
			mu.Lock()
			defer mu.Unlock()
			if watched {
				res.watched++
				res.events += events
				if !ended {
					res.cut++
				}
			}
			if ok {
				res.overheads = append(res.overheads, wall-m.delay(i, 1)-m.delay(i, 2))
			}
		})
	}
	runs.Wait()
	slices.Sort(res.overheads)
	return res
}

// createAndWait creates a run and waits for its Result (?wait=true).
func createAndWait(tb testing.TB, client *http.Client, base, body string) bool {
	resp, err := client.Post(base+"/v1/runs?wait=true", "application/json", strings.NewReader(body))
	if err != nil {
		tb.Error(err)
		return false
	}
	defer resp.Body.Close()
	var out struct {
		Success bool `json:"success"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil || resp.StatusCode != 200 || !out.Success {
		tb.Errorf("%s: %d %v %+v", body, resp.StatusCode, err, out)
		return false
	}
	return true
}

// createAndWatch creates a run (201) and reads its event stream to its
// end at once, while it goes.
func createAndWatch(tb testing.TB, client *http.Client, base, body string) (ok bool, events int, ended bool) {
	resp, err := client.Post(base+"/v1/runs", "application/json", strings.NewReader(body))
	if err != nil {
		tb.Error(err)
		return false, 0, false
	}
	var out struct {
		RunID string `json:"run_id"`
	}
	err = json.NewDecoder(resp.Body).Decode(&out)
	resp.Body.Close()
	if err != nil || resp.StatusCode != 201 {
		tb.Errorf("%s: %d %v", body, resp.StatusCode, err)
		return false, 0, false
	}
	events, ended = streamCount(tb, client, base, out.RunID)
	return ended, events, ended
}

// streamCount reads a run's event stream to its end, counts its events
// and says whether the last was run_end.
func streamCount(tb testing.TB, client *http.Client, base, id string) (n int, ended bool) {
	resp, err := client.Get(base + "/v1/runs/" + id + "/events")
	if err != nil {
		tb.Error(err)
		return 0, false
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, "id: ") {
			n++
		}
		if strings.HasPrefix(line, "event: ") {
			ended = line == "event: run_end"
		}
	}
	return n, ended
}

func percentile(ds []time.Duration, p float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	return ds[min(len(ds)-1, int(float64(len(ds))*p))]
}

// TestLoad: concurrent runs over HTTP with event subscribers all end
// well, every watched stream is read whole, and nothing is left behind
// (TestMain checks goroutines). BenchmarkLoad measures the same at scale.
func TestLoad(t *testing.T) {
	res := runLoad(t, 40, 2, loadModel{lo: 5 * time.Millisecond, hi: 20 * time.Millisecond})
	if len(res.overheads) != 40 || res.watched == 0 || res.cut > 0 || res.events < res.watched*8 {
		t.Errorf("%d runs ended well; %d streams read, %d cut short, %d events", len(res.overheads), res.watched, res.cut, res.events)
	}
}

// BenchmarkLoad: 1,000 runs at once of an agent whose model turns take
// 50 to 200 ms (two turns and a tool call each), one in ten followed
// live by its client over the event stream (100 subscribers); the
// overhead of a run is its wall time over HTTP (to its Result, or to
// its run_end on the stream) less its model's time.
//
//	go test -run '^$' -bench BenchmarkLoad -benchtime 1x ./server
func BenchmarkLoad(b *testing.B) {
	for b.Loop() {
		res := runLoad(b, 1000, 10, loadModel{lo: 50 * time.Millisecond, hi: 200 * time.Millisecond})
		b.ReportMetric(float64(percentile(res.overheads, 0.5).Microseconds())/1000, "p50-overhead-ms")
		b.ReportMetric(float64(percentile(res.overheads, 0.99).Microseconds())/1000, "p99-overhead-ms")
		b.ReportMetric(float64(res.watched), "streams")
		if res.cut > 0 || len(res.overheads) != 1000 {
			b.Errorf("%d runs ended well, %d of %d streams cut short", len(res.overheads), res.cut, res.watched)
		}
	}
}
