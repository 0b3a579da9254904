package agent

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/agentry/agentry/memory"
	"github.com/agentry/agentry/spec"
	"github.com/agentry/agentry/store"
	"github.com/agentry/agentry/tool"
	"github.com/agentry/agentry/tool/httptool"
)

// scenarioEnv names the agent the crash helper runs: the payer (empty),
// "memory" (the payer remembering its answer) or "subagent" (boss asking
// the helper agent).
const scenarioEnv = "AGENTRY_CRASH_SCENARIO"

// crashScenario builds the crash helper's agent and input.
func crashScenario(name string, st store.Store, reg *tool.Registry, h *hooks) (*Agent, map[string]any, error) {
	switch name {
	case "memory":
		a, err := memoryPayer(st, reg, WithProviderMiddleware(modelHooks(h)), withHookedMemory(h))
		return a, payerInput, err
	case "subagent":
		a, err := FromDir("testdata/agents", "boss", WithTools(hookedEcho(h)))
		return a, nil, err
	case "http":
		a, err := FromFile(os.Getenv("AGENTRY_CRASH_SPEC"), WithTools(hookedHTTP(h)))
		return a, nil, err
	}
	a, err := FromFile(payerSpec, WithTools(reg), WithProviderMiddleware(modelHooks(h)))
	return a, payerInput, err
}

// memoryPayer is the payer that appends its answer to the stream
// "ledger" of st's database.
func memoryPayer(st store.Store, reg *tool.Registry, opts ...Option) (*Agent, error) {
	sp, err := spec.Load(payerSpec)
	if err != nil {
		return nil, err
	}
	sp.Memory = &spec.Memory{Stream: "ledger", Write: []string{"final_answer"}}
	b, _ := st.(memory.Backend)
	return New(sp, append([]Option{WithTools(reg), WithBaseDir(filepath.Dir(payerSpec)), WithMemory(b)}, opts...)...)
}

// withHookedMemory calls the kill point "memory_append" after each
// append reached the backend.
func withHookedMemory(h *hooks) Option {
	return func(o *options) {
		if o.memory != nil {
			o.memory = hookedMemory{Backend: o.memory, h: h}
		}
	}
}

type hookedMemory struct {
	memory.Backend
	h *hooks
}

func (m hookedMemory) Memory() memory.Memory {
	return hookedStreams{Memory: m.Backend.Memory(), h: m.h}
}

type hookedStreams struct {
	memory.Memory
	h *hooks
}

func (m hookedStreams) Append(ctx context.Context, e memory.Entry, keep memory.Retention) (memory.Entry, error) {
	out, err := m.Memory.Append(ctx, e, keep)
	m.h.at("memory_append")
	return out, err
}

// hookedEcho is echo with kill points around its effect.
func hookedEcho(h *hooks) *tool.Registry {
	echo := tool.Must(tool.Func("echo", "Echo text.", func(_ context.Context, in echoArgs) (string, error) {
		h.at("tool_start:echo")
		defer h.at("tool_end:echo")
		return in.Text, nil
	}, tool.WithIdempotency(tool.Safe)))
	r, _ := tool.NewRegistry(echo)
	return r
}

// hookedHTTP is http_request (private addresses allowed: the test's
// server is on loopback) with the kill point "sent:http_request" after
// the request got its answer, before its result is on record.
func hookedHTTP(h *hooks) *tool.Registry {
	r, _ := tool.NewRegistry(sentHook{httptool.NewRequest(httptool.Options{AllowPrivate: true}).(requestTool), h})
	return r
}

// requestTool is what http_request is: a tool whose class and
// deduplication depend on the call.
type requestTool interface {
	tool.Tool
	tool.Classifier
	tool.Deduplicator
}

type sentHook struct {
	requestTool
	h *hooks
}

func (t sentHook) Call(ctx context.Context, args json.RawMessage) (json.RawMessage, error) {
	out, err := t.requestTool.Call(ctx, args)
	t.h.at("sent:http_request")
	return out, err
}

// crashRun is killedRun for a scenario: the id of the top run it left.
func crashRun(t *testing.T, st *testStore, scenario, point string) string {
	t.Helper()
	t.Setenv(scenarioEnv, scenario)
	id := interruptedRun(t, st, point)
	if run, err := st.Get(context.Background(), id); err == nil && run.ParentID != "" {
		return run.ParentID // the sub-run began last
	}
	return id
}

// A kill after the end-of-run memory write reached the stream, before
// the run's end was on record: the resumed run does not write it again.
func TestKillAfterTheMemoryWrite(t *testing.T) {
	ctx := context.Background()
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) {
			st := openStore(t, b.dsn(t))
			id := crashRun(t, st, "memory", "memory_append#1")
			mem, _ := st.Store.(memory.Backend)
			a, err := memoryPayer(st.Store, durableTools(t, ledger{filepath.Join(t.TempDir(), "l")}, true, nil))
			if err != nil {
				t.Fatal(err)
			}
			sess, err := a.Resume(ctx, st, id)
			if err != nil {
				t.Fatal(err)
			}
			res, err := sess.Run(ctx)
			if err != nil || !res.Success {
				t.Fatalf("resume: %v", err)
			}
			entries, _ := mem.Memory().Read(ctx, "ledger", memory.ReadOptions{})
			if len(entries) != 1 || entries[0].RunID != id {
				t.Errorf("the stream holds %d entries after the resume; want the one the killed run wrote: %+v", len(entries), entries)
			}
			if len(res.MemoryDeltas) != 1 || res.MemoryDeltas[0].ID != entries[0].ID {
				t.Errorf("memory_deltas %+v; want the entry written before the kill", res.MemoryDeltas)
			}
		})
	}
}

// A kill inside a sub-agent's run, or after it ended but before its
// caller recorded the answer: the resumed caller continues the same
// sub-run (or takes its stored Result) instead of running the sub-agent
// again.
func TestKillInASubAgent(t *testing.T) {
	ctx := context.Background()
	for _, point := range []string{"tool_end:echo#1", "after_final_write#1"} {
		t.Run(point, func(t *testing.T) {
			st := openStore(t, filepathJoin(t, "runs.db"))
			id := crashRun(t, st, "subagent", point)
			subs, _ := st.List(ctx, store.Filter{ParentID: id})
			if len(subs) != 1 {
				t.Fatalf("%d sub-runs before the resume; want the killed one", len(subs))
			}
			a := storedAgent(t, st, id, WithTools(hookedEcho(nil)))
			res, err := resumeRun(t, a, st, id)
			if err != nil || !res.Success || !strings.Contains(res.RawContent, "a small helper") {
				t.Fatalf("resume: %v %+v", err, res)
			}
			subs, _ = st.List(ctx, store.Filter{ParentID: id})
			if len(subs) != 1 || subs[0].Status != store.Completed {
				t.Errorf("sub-runs after the resume: %+v; want the one, completed", subs)
			}
		})
	}
}

// A POST killed after it reached the server, before its result was on
// record: a resume sends it again, with the same Idempotency-Key, only
// to a host the spec names as keeping one effect per key; to any other
// it pauses for approval, and sends it again only once approved.
func TestKillAfterAnHTTPRequest(t *testing.T) {
	for _, tc := range []struct {
		name, keyHosts string
		dedup          bool
	}{
		{"a host that ignores the key", `[]`, false},
		{"a host named in idempotency_key_hosts", `["127.0.0.1"]`, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var mu sync.Mutex
			var keys []string
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				mu.Lock()
				keys = append(keys, r.Header.Get("Idempotency-Key"))
				mu.Unlock()
				w.Header().Set("Content-Type", "application/json")
				w.Write([]byte(`{"charged": true}`))
			}))
			defer srv.Close()
			sent := func() []string {
				mu.Lock()
				defer mu.Unlock()
				return append([]string(nil), keys...)
			}
			dir := t.TempDir()
			writeFile(t, filepath.Join(dir, "turns.json"), `{"turns": [
				{"tool_calls": [{"name": "http_request", "arguments": {"method": "POST", "url": "`+srv.URL+`/charge", "json": {"amount": 5}}}]},
				{"content": "Charged."}]}`)
			specPath := filepath.Join(dir, "charger.json")
			writeFile(t, specPath, `{"agent_name": "charger", "version": "v1", "model_name": "scripted:turns.json",
				"system_text": "Charge.", "tools": ["http_request"],
				"policy": {"network": {"allow_private": true, "idempotency_key_hosts": `+tc.keyHosts+`}}}`)
			t.Setenv("AGENTRY_CRASH_SPEC", specPath)
			st := openStore(t, filepathJoin(t, "runs.db"))
			id := crashRun(t, st, "http", "sent:http_request#1")
			if got := sent(); len(got) != 1 || got[0] != id+":1:0" {
				t.Fatalf("before the resume the server saw %v", got)
			}
			a := storedAgent(t, st, id, WithTools(hookedHTTP(nil)))
			res, err := resumeRun(t, a, st, id)
			if !tc.dedup {
				if !errors.Is(err, ErrAwaitingApproval) || len(sent()) != 1 {
					t.Fatalf("resume: %v, the server saw %v; want a pause and no second request", err, sent())
				}
				res, err = resumeRun(t, a, st, id, Approve(id+":1:0"))
			}
			if err != nil || !res.Success {
				t.Fatalf("the resumed run: %v", err)
			}
			if got := sent(); len(got) != 2 || got[1] != id+":1:0" {
				t.Errorf("the server saw %v; want the request again with its key", got)
			}
		})
	}
}

func writeFile(t *testing.T, path, data string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(data), 0o600); err != nil {
		t.Fatal(err)
	}
}
