package server

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/agentry/agentry/agent"
	"github.com/agentry/agentry/llm"
	"github.com/agentry/agentry/spec"
	"github.com/agentry/agentry/store"
)

// newViewerFixture is a server over a fresh SQLite store with the agents
// of testdata/agents (trip: three turns and three tool calls, priced;
// approve: a write that waits for a person's approval), waiter (held
// until f.release closes) and stepper (a first turn with a tool call,
// then a second held until f.release closes). Every event stream it serves is cut once,
// after its first events, so that a client must resume it.
func newViewerFixture(t *testing.T, keys []Key) (*fixture, *cutter) {
	t.Helper()
	st, err := store.Open(context.Background(), filepath.Join(t.TempDir(), "runs.db"))
	if err != nil {
		t.Fatal(err)
	}
	tools := agent.WithTools(kvRegistry(t))
	reg, err := agent.LoadRegistry(spec.Dir{Path: "testdata/agents"}, tools)
	if err != nil {
		t.Fatal(err)
	}
	f := &fixture{st: st, release: make(chan struct{})}
	waiter, err := agent.New(&spec.Spec{AgentName: "waiter", Version: "v1", SystemText: "Wait."}, agent.WithProvider(held{f.release}, "test"))
	if err != nil {
		t.Fatal(err)
	}
	stepper, err := agent.New(&spec.Spec{AgentName: "stepper", Version: "v1", SystemText: "Step.", Tools: []string{"kv_set"}},
		agent.WithProvider(&twoStep{release: f.release}, "test"), tools)
	if err != nil {
		t.Fatal(err)
	}
	if err := reg.Register(waiter, stepper); err != nil {
		t.Fatal(err)
	}
	f.srv, err = New(Config{Store: st, Agents: reg, Keys: keys, AgentOptions: []agent.Option{tools}})
	if err != nil {
		t.Fatal(err)
	}
	cut := &cutter{h: f.srv, cut: map[string]bool{}}
	f.http = httptest.NewServer(cut)
	f.cleanup(t, reg, waiter, stepper, st)
	return f, cut
}

// twoStep is a model whose first call asks for a tool after a moment,
// and whose later calls answer once release is closed: a run that stays
// going with its first turn on record (what a turn queued reaches the
// store within 50 ms, however long the next model call takes).
type twoStep struct {
	release chan struct{}
	calls   atomic.Int32
}

func (m *twoStep) Generate(ctx context.Context, _ *llm.Request) (*llm.Response, error) {
	if m.calls.Add(1) == 1 {
		t := time.NewTimer(60 * time.Millisecond)
		defer t.Stop()
		select {
		case <-t.C:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		return &llm.Response{Content: "Saving it first.", ToolCalls: []llm.ToolCall{{ID: "call_1_1", Name: "kv_set",
			Arguments: json.RawMessage(`{"key": "k", "value": "v"}`)}}}, nil
	}
	return held{m.release}.Generate(ctx, nil)
}

// cutter ends the first event stream of each run after its first write
// of events, as a dropped connection would, and notes the Last-Event-ID
// of every stream asked for.
type cutter struct {
	h    http.Handler
	mu   sync.Mutex
	cut  map[string]bool
	last []string
}

func (c *cutter) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if !strings.HasSuffix(r.URL.Path, "/events") {
		c.h.ServeHTTP(w, r)
		return
	}
	c.mu.Lock()
	c.last = append(c.last, r.Header.Get("Last-Event-ID"))
	first := !c.cut[r.URL.Path]
	c.cut[r.URL.Path] = true
	c.mu.Unlock()
	if first {
		ctx, cancel := context.WithCancel(r.Context())
		defer cancel()
		w, r = &cutWriter{ResponseWriter: w, cancel: cancel}, r.WithContext(ctx)
	}
	c.h.ServeHTTP(w, r)
}

// resumed says whether a stream was asked for after an event id.
func (c *cutter) resumed() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.ContainsFunc(c.last, func(s string) bool { return s != "" })
}

// cutWriter cancels its request once an event was written: the stream
// ends at the handler's next look at its context.
type cutWriter struct {
	http.ResponseWriter
	cancel context.CancelFunc
}

func (w *cutWriter) Write(b []byte) (int, error) {
	if strings.HasPrefix(string(b), "id: ") {
		w.cancel()
	}
	return w.ResponseWriter.Write(b)
}

func (w *cutWriter) Flush() { w.ResponseWriter.(http.Flusher).Flush() }

// get fetches path with headers, and answers the response and its body.
func get(t *testing.T, url string, hdr map[string]string) (*http.Response, string) {
	t.Helper()
	req, _ := http.NewRequest("GET", url, nil)
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp, string(body)
}

// TestViewerFiles: the page is served at / to anyone (no key: it holds
// no data) with a strict Content-Security-Policy, not cached without
// asking; its files by hash, kept long; an unknown API path is still a
// JSON 404.
func TestViewerFiles(t *testing.T) {
	keys := []Key{{Name: "val", SHA256: HashKey("view-key"), Role: RoleViewer}}
	f, _ := newViewerFixture(t, keys)
	resp, page := get(t, f.http.URL+"/", nil)
	csp := resp.Header.Get("Content-Security-Policy")
	if resp.StatusCode != 200 || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/html") ||
		!strings.Contains(csp, "default-src 'self'") || strings.Contains(csp, "unsafe") || resp.Header.Get("Cache-Control") != "no-cache" {
		t.Fatalf("/: %d %v", resp.StatusCode, resp.Header)
	}
	if strings.Contains(page, "http://") || strings.Contains(page, "https://") || strings.Contains(page, "style=") {
		t.Error("the page names another origin or has inline style")
	}
	i := strings.Index(page, `/viewer/app.js?v=`)
	if i < 0 {
		t.Fatalf("the page does not load its script by hash:\n%s", page)
	}
	src := page[i : i+strings.IndexByte(page[i:], '"')]
	resp, js := get(t, f.http.URL+src, nil)
	if resp.StatusCode != 200 || !strings.Contains(resp.Header.Get("Cache-Control"), "immutable") || !strings.Contains(js, "import") ||
		!strings.HasPrefix(resp.Header.Get("Content-Type"), "text/javascript") {
		t.Fatalf("%s: %d %v", src, resp.StatusCode, resp.Header)
	}
	etag := resp.Header.Get("ETag")
	resp, _ = get(t, f.http.URL+"/viewer/app.js", map[string]string{"If-None-Match": etag})
	if resp.StatusCode != http.StatusNotModified || resp.Header.Get("Cache-Control") != "no-cache" {
		t.Errorf("revalidated: %d %v", resp.StatusCode, resp.Header)
	}
	for _, path := range []string{"/viewer/nope.js", "/viewer/index.html"} {
		if resp, _ := get(t, f.http.URL+path, nil); resp.StatusCode != 404 {
			t.Errorf("%s: %d", path, resp.StatusCode)
		}
	}
	code, body := f.do(t, "GET", "/v1/nothing", "view-key", "")
	if e, _ := body["error"].(map[string]any); code != 404 || e["code"] != "not_found" {
		t.Errorf("an unknown API path: %d %v", code, body)
	}
	code, body = f.do(t, "GET", "/v1/whoami", "", "")
	if code != 401 {
		t.Errorf("whoami without a key: %d %v", code, body)
	}
	code, body = f.do(t, "GET", "/v1/whoami", "view-key", "")
	if code != 200 || body["name"] != "val" || body["role"] != "viewer" || body["keys"] != true {
		t.Errorf("whoami: %d %v", code, body)
	}
	if !slices.Equal(f.srv.pages, []string{"GET /{$}", "GET /viewer/{file}"}) {
		t.Errorf("the viewer's routes: %v", f.srv.pages)
	}
}

// TestAuditAndResumeStream: a paused run's audit records say paused,
// then approved once it is resumed; its event stream read from the start
// goes through the pause to the resumed run's end, with a "resume" event
// where the resumed turn starts again.
func TestAuditAndResumeStream(t *testing.T) {
	f, _ := newViewerFixture(t, nil)
	code, res := f.do(t, "POST", "/v1/runs?wait=true", "", `{"agent": "approve", "input": {"task": "2.0.0"}}`)
	if code != 200 || res["terminate_reason"] != "awaiting_approval" {
		t.Fatalf("%d %v", code, res)
	}
	id := res["id"].(string)
	_, audit := f.do(t, "GET", "/v1/runs/"+id+"/audit", "", "")
	if recs, _ := audit["records"].([]any); len(recs) != 1 || recs[0].(map[string]any)["decision"] != "pause" {
		t.Fatalf("audit of the paused run: %v", audit)
	}
	paused := f.stream(t, id, 0)
	if last := paused[len(paused)-1]; last.typ != "run_end" {
		t.Fatalf("the paused run's stream ends with %+v", last)
	}
	f.do(t, "POST", "/v1/runs/"+id+"/resume?wait=true", "", `{"approve": ["call_1_1"]}`)
	_, audit = f.do(t, "GET", "/v1/runs/"+id+"/audit", "", "")
	if recs, _ := audit["records"].([]any); len(recs) != 2 || recs[1].(map[string]any)["decision"] != "approve" {
		t.Fatalf("audit of the resumed run: %v", audit)
	}
	all := f.stream(t, id, 0)
	var types []string
	for i, e := range all {
		types = append(types, e.typ)
		// One number per event, across the resume: its seq is its id.
		if seq, ok := e.data["seq"]; e.typ != "resume" && (!ok || seq != float64(e.id) || i > 0 && e.id <= all[i-1].id) {
			t.Fatalf("event %d (%s) has id %d and seq %v", i, e.typ, e.id, seq)
		}
	}
	i := slices.Index(types, "resume")
	if i < 0 || types[i-1] != "run_end" || types[len(types)-1] != "run_end" || all[i].data["turn"] != 1.0 {
		t.Fatalf("the resumed run's stream: %v", types)
	}
	if rest := f.stream(t, id, paused[len(paused)-1].id); len(rest) != len(all)-len(paused) || rest[0].typ != "resume" {
		t.Errorf("resumed after the pause: %d events, want %d", len(rest), len(all)-len(paused))
	}
	if code, body := f.do(t, "GET", "/v1/runs/run_nope/audit", "", ""); code != 404 {
		t.Errorf("audit of no run: %d %v", code, body)
	}
}
