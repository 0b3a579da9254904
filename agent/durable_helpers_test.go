package agent

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"

	"github.com/agentry/agentry/llm"
	"github.com/agentry/agentry/llm/scripted"
	"github.com/agentry/agentry/runlog"
	"github.com/agentry/agentry/store"
	_ "github.com/agentry/agentry/store/postgres"
	_ "github.com/agentry/agentry/store/sqlite"
	"github.com/agentry/agentry/tool"
)

// ledger is the world a pay tool changes: the idempotency keys it was
// sent, one a line, in a file that outlives a killed process. A payment
// service that deduplicates by key takes effect once per distinct key.
type ledger struct{ path string }

func (l ledger) send(key string) error {
	f, err := os.OpenFile(l.path, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o600)
	if err != nil {
		return err
	}
	defer f.Close()
	_, err = f.WriteString(key + "\n")
	return err
}

// sends returns every key the tool sent, in order.
func (l ledger) sends(t testing.TB) []string {
	t.Helper()
	data, err := os.ReadFile(l.path)
	if os.IsNotExist(err) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	return strings.Fields(string(data))
}

type payArgs struct {
	To     string `json:"to"`
	Amount int    `json:"amount"`
}

// hooks calls kill points by name, counting each name's occurrences
// ("tool_start:pay#1").
type hooks struct {
	mu   sync.Mutex
	seen map[string]int
	fn   func(point string)
}

func (h *hooks) at(name string) {
	if h == nil {
		return
	}
	h.mu.Lock()
	if h.seen == nil {
		h.seen = map[string]int{}
	}
	h.seen[name]++
	point := fmt.Sprintf("%s#%d", name, h.seen[name])
	h.mu.Unlock()
	h.fn(point)
}

// killAt returns hooks that kill this process with SIGKILL at point.
func killAt(point string) *hooks {
	return &hooks{fn: func(p string) {
		if p == point {
			syscall.Kill(os.Getpid(), syscall.SIGKILL)
			select {} // the signal is on its way
		}
	}}
}

// durableTools are add (safe) and pay (non-idempotent; deduplicating by
// key when dedup), with kill points before and after each effect.
func durableTools(t testing.TB, l ledger, dedup bool, h *hooks) *tool.Registry {
	add := tool.Must(tool.Func("add", "Add two integers.", func(_ context.Context, in addArgs) (int, error) {
		h.at("tool_start:add")
		defer h.at("tool_end:add")
		return in.A + in.B, nil
	}, tool.WithIdempotency(tool.Safe)))
	opts := []tool.Option{tool.WithIdempotency(tool.NonIdempotent)}
	if dedup {
		opts = append(opts, tool.WithDeduplication())
	}
	pay := tool.Must(tool.Func("pay", "Pay someone.", func(ctx context.Context, in payArgs) (map[string]any, error) {
		h.at("tool_start:pay")
		if err := l.send(tool.CallFrom(ctx).Key()); err != nil {
			return nil, err
		}
		h.at("tool_end:pay")
		return map[string]any{"paid": in.Amount, "to": in.To}, nil
	}, opts...))
	r, err := tool.NewRegistry(add, pay)
	if err != nil {
		panic(err) // the names are fixed and distinct
	}
	return r
}

// modelHooks is provider middleware with kill points around each model
// call; it sits inside the run log, so "before" is after the turn's
// commit and "after" before the reply is recorded.
func modelHooks(h *hooks) llm.Middleware {
	return func(next llm.Provider) llm.Provider {
		return scripted.Func(func(ctx context.Context, req *llm.Request) (*llm.Response, error) {
			h.at("before_model")
			resp, err := next.Generate(ctx, req)
			h.at("after_model")
			return resp, err
		})
	}
}

// hookedStore calls a kill point before the write of the final Result.
type hookedStore struct {
	store.Store
	h *hooks
}

func (s hookedStore) Append(ctx context.Context, w store.Write) error {
	final := slices.ContainsFunc(w.Records, func(r store.Record) bool { return r.Kind == store.KindResult })
	if final {
		s.h.at("final_write")
	}
	err := s.Store.Append(ctx, w)
	if final && err == nil {
		s.h.at("after_final_write")
	}
	return err
}

const payerSpec = "testdata/durable/payer.json"

var payerInput = map[string]any{"task": "pay bob what 2 + 3 makes"}

func payerAgent(t testing.TB, reg *tool.Registry, opts ...Option) *Agent {
	t.Helper()
	a, err := FromFile(payerSpec, append([]Option{WithTools(reg)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// testStore is a store with the data source name it was opened with,
// for the crash helper to open it too.
type testStore struct {
	store.Store
	dsn string
}

func openStore(t testing.TB, dsn string) *testStore {
	t.Helper()
	st, err := store.Open(context.Background(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return &testStore{Store: st, dsn: dsn}
}

// comparable is a Result without what differs between two runs of the
// same work: ids, times and durations.
func comparable(t testing.TB, res *Result) string {
	t.Helper()
	cp := *res
	cp.ID, cp.SessionID, cp.TraceRef = "", "", ""
	cp.StartedAt, cp.FinishedAt = Timestamp{}, Timestamp{}
	cp.Metrics.DurationMS, cp.Metrics.ModelLatencyMS, cp.Metrics.ToolLatencyMS = 0, 0, nil
	cp.Steps = make([]Step, len(res.Steps))
	for i, s := range res.Steps {
		s.Timestamp = Timestamp{}
		if s.Action != nil {
			a := *s.Action
			a.DurationMS = 0
			s.Action = &a
		}
		cp.Steps[i] = s
	}
	cp.ModelCalls = make([]ModelCall, len(res.ModelCalls))
	for i, c := range res.ModelCalls {
		c.DurationMS = 0
		cp.ModelCalls[i] = c
	}
	b, err := json.MarshalIndent(cp, "", " ")
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// storedResult is the Result the log of runID ends with.
func storedResult(t testing.TB, st store.Store, runID string) json.RawMessage {
	t.Helper()
	l, err := runlog.Read(context.Background(), st, runID)
	if err != nil {
		t.Fatal(err)
	}
	return l.Result
}

var jsonMarshal = json.Marshal

// storedAgent is Stored, failing the test on an error.
func storedAgent(t testing.TB, st store.Store, runID string, opts ...Option) *Agent {
	t.Helper()
	a, err := Stored(context.Background(), st, runID, opts...)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// resumeRun resumes the stored run runID with a, failing the test when
// the resume is refused, and runs it to its end.
func resumeRun(t testing.TB, a *Agent, st store.Store, runID string, opts ...RunOption) (*Result, error) {
	t.Helper()
	ctx := context.Background()
	sess, err := a.Resume(ctx, st, runID, opts...)
	if err != nil {
		t.Fatal(err)
	}
	return sess.Run(ctx)
}
