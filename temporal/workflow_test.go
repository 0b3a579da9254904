package temporal

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/mock"
	commonpb "go.temporal.io/api/common/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/log"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"

	"github.com/agentry/agentry/agent"
	"github.com/agentry/agentry/internal/teststore"
	_ "github.com/agentry/agentry/llm/scripted"
	"github.com/agentry/agentry/pipeline"
	"github.com/agentry/agentry/runlog"
	"github.com/agentry/agentry/store"
	_ "github.com/agentry/agentry/store/postgres"
	_ "github.com/agentry/agentry/store/sqlite"
	"github.com/agentry/agentry/tool"
	"google.golang.org/protobuf/proto"
)

// ledger is the world the pay tool changes: each key it was sent with,
// a line each.
type ledger struct {
	mu   sync.Mutex
	path string
}

func (l *ledger) send(key string) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	f, err := os.OpenFile(l.path, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o600)
	if err != nil {
		return err
	}
	defer f.Close()
	_, err = f.WriteString(key + "\n")
	return err
}

func (l *ledger) sends(t testing.TB) []string {
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

// payTools are add (safe) and pay (non-idempotent), which writes its key
// to the ledger.
func payTools(l *ledger) *tool.Registry {
	type addArgs struct {
		A int `json:"a"`
		B int `json:"b"`
	}
	type payArgs struct {
		To     string `json:"to"`
		Amount int    `json:"amount"`
	}
	add := tool.Must(tool.Func("add", "Add two integers.", func(_ context.Context, in addArgs) (int, error) {
		return in.A + in.B, nil
	}, tool.WithIdempotency(tool.Safe)))
	pay := tool.Must(tool.Func("pay", "Pay someone.", func(ctx context.Context, in payArgs) (map[string]any, error) {
		if err := l.send(tool.CallFrom(ctx).Key()); err != nil {
			return nil, err
		}
		return map[string]any{"paid": in.Amount, "to": in.To}, nil
	}, tool.WithIdempotency(tool.NonIdempotent)))
	type reportArgs struct {
		Bytes int `json:"bytes"`
	}
	report := tool.Must(tool.Func("report", "Write a report of so many bytes.", func(_ context.Context, in reportArgs) (string, error) {
		return strings.Repeat("r", in.Bytes), nil
	}, tool.WithIdempotency(tool.Safe)))
	type waitArgs struct {
		MS int `json:"ms"`
	}
	wait := tool.Must(tool.Func("wait", "Wait so many milliseconds.", func(ctx context.Context, in waitArgs) (string, error) {
		select {
		case <-time.After(time.Duration(in.MS) * time.Millisecond):
			return "waited", nil
		case <-ctx.Done():
			return "", ctx.Err()
		}
	}, tool.WithIdempotency(tool.Safe)))
	r, err := tool.NewRegistry(add, pay, report, wait)
	if err != nil {
		panic(err)
	}
	return r
}

// request is a Request of the spec in testdata.
func request(t testing.TB, name string) Request {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	dir, _ := filepath.Abs("testdata")
	return Request{Spec: b, BaseDir: dir, Input: map[string]any{"task": "pay bob what 2 + 3 makes"}, UserID: "ann"}
}

// env is a test workflow environment with the run workflow and its real
// activities, over st.
func env(t *testing.T, st store.Store, l *ledger) *testsuite.TestWorkflowEnvironment {
	var s testsuite.WorkflowTestSuite
	s.SetLogger(log.NewStructuredLogger(slog.New(slog.DiscardHandler)))
	e := s.NewTestWorkflowEnvironment()
	e.SetTestTimeout(time.Minute)
	e.SetWorkerOptions(WorkerOptions())
	if err := Register(e, Config{Store: st, Options: []agent.Option{agent.WithTools(payTools(l))}}); err != nil {
		t.Fatal(err)
	}
	return e
}

func outcomeOf(t *testing.T, e *testsuite.TestWorkflowEnvironment) (*Outcome, *agent.Result) {
	t.Helper()
	if !e.IsWorkflowCompleted() {
		t.Fatal("the workflow did not complete")
	}
	if err := e.GetWorkflowError(); err != nil {
		t.Fatalf("workflow failed: %v", err)
	}
	var out Outcome
	if err := e.GetWorkflowResult(&out); err != nil {
		t.Fatal(err)
	}
	var res agent.Result
	if err := json.Unmarshal(out.Result, &res); err != nil {
		t.Fatalf("the Outcome's Result: %v", err)
	}
	return &out, &res
}

// A run on Temporal ends as the same run made locally: the same answer,
// steps and usage, its log complete, the payment made once under the
// key the workflow id and the call's place give it.
func TestWorkflowRun(t *testing.T) {
	st := teststore.Open(t)
	l := &ledger{path: filepath.Join(t.TempDir(), "ledger")}
	e := env(t, st, l)
	const runID = "run_wf_1"
	e.SetStartWorkflowOptions(client.StartWorkflowOptions{ID: runID})
	e.ExecuteWorkflow(WorkflowName, request(t, "payer.json"), (*Carried)(nil))
	out, res := outcomeOf(t, e)
	if out.RunID != runID || out.Status != string(store.Completed) || !res.Success || res.Result != "Paid bob 5." {
		t.Fatalf("outcome %s %s, result %v (success %v)", out.RunID, out.Status, res.Result, res.Success)
	}
	if sends := l.sends(t); !slices.Equal(sends, []string{runID + ":2:0"}) {
		t.Errorf("payments sent with keys %v; want one, %s:2:0", sends, runID)
	}
	if res.TokenUsage.TotalTokens != 239 || len(res.Steps) != 3 || res.Iterations != 3 {
		t.Errorf("usage %d tokens, %d steps, %d turns; want 239, 3, 3", res.TokenUsage.TotalTokens, len(res.Steps), res.Iterations)
	}
	stored, err := runlog.Read(context.Background(), st, runID)
	if err != nil {
		t.Fatal(err)
	}
	if stored.Run.Status != store.Completed || stored.Run.Holder != "" || !strings.HasPrefix(stored.Start.Driver, "temporal:") {
		t.Errorf("stored run %s held by %q, driver %q", stored.Run.Status, stored.Run.Holder, stored.Start.Driver)
	}
	var storedRes agent.Result
	if err := json.Unmarshal(stored.Result, &storedRes); err != nil || storedRes.Result != res.Result {
		t.Errorf("stored Result %s (%v); want the Outcome's", stored.Result, err)
	}
	if stored.Start.UserID != "ann" {
		t.Errorf("the run's user is %q; want ann", stored.Start.UserID)
	}
}

// A call the policy holds back waits for the approve update; an update
// that names no waiting call is refused, naming those that wait.
func TestWorkflowApproval(t *testing.T) {
	st := teststore.Open(t)
	l := &ledger{path: filepath.Join(t.TempDir(), "ledger")}
	e := env(t, st, l)
	const runID = "run_wf_2"
	e.SetStartWorkflowOptions(client.StartWorkflowOptions{ID: runID})
	var rejected error
	var waited *Progress
	e.RegisterDelayedCallback(func() {
		v, err := e.QueryWorkflow(QueryProgress)
		if err != nil {
			t.Error(err)
			return
		}
		waited = &Progress{}
		v.Get(waited)
		e.UpdateWorkflow(UpdateApprove, "bad", &testsuite.TestUpdateCallback{
			OnReject: func(err error) { rejected = err }, OnAccept: func() {}, OnComplete: func(any, error) {}}, Decision{Approve: []string{"no-such-call"}})
		e.UpdateWorkflow(UpdateApprove, "good", &testsuite.TestUpdateCallback{
			OnReject: func(err error) { t.Errorf("approval refused: %v", err) }, OnAccept: func() {}, OnComplete: func(any, error) {}},
			Decision{Approve: []string{runID + ":2:0"}, By: "bob"})
	}, time.Hour)
	e.ExecuteWorkflow(WorkflowName, request(t, "approver.json"), (*Carried)(nil))
	out, res := outcomeOf(t, e)
	if out.Status != string(store.Completed) || res.Result != "Paid bob 5." {
		t.Fatalf("outcome %s, result %v", out.Status, res.Result)
	}
	if waited == nil || waited.Status != string(store.AwaitingApproval) || len(waited.Waiting) != 1 || waited.Waiting[0].Key != runID+":2:0" {
		t.Errorf("progress while waiting: %+v", waited)
	}
	if rejected == nil || !strings.Contains(rejected.Error(), runID+":2:0") {
		t.Errorf("an approval of no waiting call: %v; want a refusal naming the waiting call", rejected)
	}
	if sends := l.sends(t); !slices.Equal(sends, []string{runID + ":2:0"}) {
		t.Errorf("payments %v; want one", sends)
	}
}

// A non-idempotent call whose task failed (its worker died) is never
// sent again blindly: the run waits for a person; denied, the model is
// told the outcome is unknown.
func TestWorkflowUnknownOutcome(t *testing.T) {
	st := teststore.Open(t)
	l := &ledger{path: filepath.Join(t.TempDir(), "ledger")}
	e := env(t, st, l)
	const runID = "run_wf_3"
	e.SetStartWorkflowOptions(client.StartWorkflowOptions{ID: runID})
	x := &activities{cfg: Config{Store: st, Options: []agent.Option{agent.WithTools(payTools(l))}}}
	e.OnActivity(ToolName, mock.Anything, mock.Anything).Return(func(ctx context.Context, in toolIn) (runlog.ToolResult, error) {
		if in.Call.Tool == "pay" {
			l.send(in.Call.Key) // it took effect, and then the worker died
			return runlog.ToolResult{}, temporal.NewTimeoutError(0, errors.New("heartbeat timeout"))
		}
		return x.tool(ctx, in)
	})
	e.RegisterDelayedCallback(func() {
		e.UpdateWorkflow(UpdateApprove, "deny", &testsuite.TestUpdateCallback{
			OnReject: func(err error) { t.Errorf("denial refused: %v", err) }, OnAccept: func() {}, OnComplete: func(any, error) {}},
			Decision{Deny: []string{runID + ":2:0"}, Reason: "checked by hand"})
	}, time.Hour)
	e.ExecuteWorkflow(WorkflowName, request(t, "payer.json"), (*Carried)(nil))
	_, res := outcomeOf(t, e)
	if sends := l.sends(t); len(sends) != 1 {
		t.Errorf("payments %v; want the one made before the worker died, and no other", sends)
	}
	var unknown bool
	for _, s := range res.Steps {
		if s.Action != nil && s.Action.Tool == "pay" && strings.Contains(s.Observation, "unknown_outcome") {
			unknown = true
		}
	}
	if !unknown {
		t.Errorf("the model was not told the payment's outcome is unknown: %+v", res.Steps)
	}
}

// A cancelled workflow ends its run aborted, on record.
func TestWorkflowAbort(t *testing.T) {
	st := teststore.Open(t)
	l := &ledger{path: filepath.Join(t.TempDir(), "ledger")}
	e := env(t, st, l)
	const runID = "run_wf_4"
	e.SetStartWorkflowOptions(client.StartWorkflowOptions{ID: runID})
	e.RegisterDelayedCallback(e.CancelWorkflow, time.Hour) // while it waits for approval
	e.ExecuteWorkflow(WorkflowName, request(t, "approver.json"), (*Carried)(nil))
	out, res := outcomeOf(t, e)
	if out.Status != string(store.Aborted) || res.TerminateReason != agent.ReasonAborted {
		t.Errorf("outcome %s, reason %s; want aborted", out.Status, res.TerminateReason)
	}
	run, err := st.Get(context.Background(), runID)
	if err != nil || run.Status != store.Aborted {
		t.Errorf("stored run %+v (%v); want aborted", run, err)
	}
	if sends := l.sends(t); len(sends) != 0 {
		t.Errorf("payments %v; want none", sends)
	}
}

// A run that cannot go on between activities is refused before it
// starts, saying why; a request that names no agent too.
func TestWorkflowRefusals(t *testing.T) {
	for name, tc := range map[string]struct {
		req  func(t *testing.T) Request
		want string
	}{
		"private tools": {func(t *testing.T) Request { return request(t, "private.json") }, "private tools"},
		"no agent":      {func(t *testing.T) Request { return Request{Input: map[string]any{}} }, "names no agent"},
		"both":          {func(t *testing.T) Request { r := request(t, "payer.json"); r.Agent = "payer"; return r }, "give one"},
		"bad input":     {func(t *testing.T) Request { r := request(t, "payer.json"); r.Input = nil; return r }, "task"},
	} {
		t.Run(name, func(t *testing.T) {
			st := teststore.Open(t)
			e := env(t, st, &ledger{path: filepath.Join(t.TempDir(), "ledger")})
			e.SetStartWorkflowOptions(client.StartWorkflowOptions{ID: "run_refused"})
			e.ExecuteWorkflow(WorkflowName, tc.req(t), (*Carried)(nil))
			err := e.GetWorkflowError()
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("workflow error %v; want one saying %q", err, tc.want)
			}
			if _, err := st.Get(context.Background(), "run_refused"); !errors.Is(err, store.ErrNotFound) {
				t.Errorf("a refused run was stored: %v", err)
			}
		})
	}
}

// Payloads over Temporal's limits (a tool's 3 MB result, a 300 KB input)
// are kept in the run store, with references in the history: the run
// ends as it would locally, its result whole in its log.
func TestWorkflowLargePayloads(t *testing.T) {
	st := teststore.Open(t)
	e := env(t, st, &ledger{path: filepath.Join(t.TempDir(), "ledger")})
	e.SetDataConverter(blobsOnly(t, st))
	const runID = "run_wf_big"
	e.SetStartWorkflowOptions(client.StartWorkflowOptions{ID: runID})
	req := request(t, "big.json")
	req.Input = map[string]any{"task": strings.Repeat("long input ", 30_000)}
	e.ExecuteWorkflow(WorkflowName, req, (*Carried)(nil))
	out, res := outcomeOf(t, e)
	if out.Status != "completed" || res.Result != "Reported." {
		t.Fatalf("outcome %s %v", out.Status, res.Result)
	}
	l, err := runlog.Read(context.Background(), st, runID)
	if err != nil {
		t.Fatal(err)
	}
	rec := l.Results[runID+":1:0"]
	if rec == nil || rec.Output == nil || len(*rec.Output) != 3_000_002 {
		t.Errorf("the report's result in the log: %v", rec != nil && rec.Output != nil)
	}
	// The store keeps the large payloads; a payload's reference is small.
	enc, err := blobsOnly(t, st).ToPayload(req)
	if err != nil || string(enc.GetMetadata()["encoding"]) != blobEncoding || len(enc.GetData()) > 100 {
		t.Fatalf("the request's payload: %v (%v)", enc, err)
	}
	var back Request
	if err := blobsOnly(t, st).FromPayload(enc, &back); err != nil || back.Input["task"] != req.Input["task"] {
		t.Errorf("the request read back from its reference: %v", err)
	}
	// A reference whose blob was changed is refused.
	b := st.(store.Blobs)
	b.PutBlob(context.Background(), "sha256:0000", []byte("x"))
	forged := &commonpb.Payload{Metadata: map[string][]byte{"encoding": []byte(blobEncoding)}, Data: []byte("sha256:0000")}
	if err := blobsOnly(t, st).FromPayload(forged, &back); err == nil || !strings.Contains(err.Error(), "digest") {
		t.Errorf("a blob that does not match its digest: %v", err)
	}
}

// blobsOnly is the data converter with the store's blobs and no key.
func blobsOnly(t *testing.T, st store.Store) converter.DataConverter {
	t.Helper()
	dc, err := DataConverter(st, nil)
	if err != nil {
		t.Fatal(err)
	}
	return dc
}

// With a key, no payload holds a run's data in the clear: not in the
// history, not in the store's blobs; another key opens none of them, and
// a changed one is refused.
func TestSealedPayloads(t *testing.T) {
	st := teststore.Open(t)
	key := bytes.Repeat([]byte{7}, 32)
	dc, err := DataConverter(st, key)
	if err != nil {
		t.Fatal(err)
	}
	const secret = "the input's secret words"
	for _, size := range []int{1, 300_000} { // in the history, and in a blob
		req := Request{Input: map[string]any{"task": secret + strings.Repeat(" ", size)}}
		p, err := dc.ToPayload(req)
		if err != nil {
			t.Fatal(err)
		}
		raw, _ := proto.Marshal(p)
		if bytes.Contains(raw, []byte(secret)) {
			t.Errorf("size %d: the payload holds the input in the clear", size)
		}
		if string(p.GetMetadata()["encoding"]) == blobEncoding {
			blob, err := st.(store.Blobs).Blob(context.Background(), string(p.GetData()))
			if err != nil || bytes.Contains(blob, []byte(secret)) {
				t.Errorf("the blob holds the input in the clear (%v)", err)
			}
		}
		var back Request
		if err := dc.FromPayload(p, &back); err != nil || back.Input["task"] != req.Input["task"] {
			t.Errorf("size %d: read back: %v", size, err)
		}
		other, _ := DataConverter(st, bytes.Repeat([]byte{8}, 32))
		if err := other.FromPayload(p, &back); err == nil {
			t.Errorf("size %d: another key opened the payload", size)
		}
	}
	p, _ := dc.ToPayload("short")
	p.Data[len(p.Data)-1] ^= 1
	var s string
	if err := dc.FromPayload(p, &s); err == nil {
		t.Error("a changed sealed payload was opened")
	}
	if _, err := DataConverter(st, []byte("short key")); err == nil {
		t.Error("a 9-byte key was taken")
	}
}

// A run's timeout counts from its start across its activities, the
// time its calls took included, as a local run's does: each planning
// activity is given what is left, not a timeout of its own.
func TestWorkflowTimeout(t *testing.T) {
	st := teststore.Open(t)
	e := env(t, st, &ledger{path: filepath.Join(t.TempDir(), "ledger")})
	e.SetStartWorkflowOptions(client.StartWorkflowOptions{ID: "run_wf_slow"})
	e.ExecuteWorkflow(WorkflowName, request(t, "slow.json"), (*Carried)(nil))
	out, res := outcomeOf(t, e)
	if res.TerminateReason != agent.ReasonTimeout || res.Success {
		t.Errorf("outcome %s, reason %s; want the run timed out (two calls of 600 ms, a timeout of 1 s)", out.Status, res.TerminateReason)
	}
}

// A pipeline runs as a workflow, each stage's agent a run of its own (a
// child workflow, its calls activities), and ends as the same pipeline
// run made locally: its stages' outputs in the envelope, their usage
// summed, the payment made once.
func TestWorkflowPipeline(t *testing.T) {
	st := teststore.Open(t)
	l := &ledger{path: filepath.Join(t.TempDir(), "ledger")}
	e := env(t, st, l)
	const runID = "run_wf_pipe"
	e.SetStartWorkflowOptions(client.StartWorkflowOptions{ID: runID})
	def, err := os.ReadFile("testdata/pipeline.json")
	if err != nil {
		t.Fatal(err)
	}
	dir, _ := filepath.Abs("testdata")
	input := map[string]any{"task": "pay bob what 2 + 3 makes"}
	e.ExecuteWorkflow(PipelineWorkflowName, PipelineRequest{Definition: def, BaseDir: dir, Input: input, UserID: "ann"})
	out, res := outcomeOf(t, e)
	var pres pipeline.Result
	if err := json.Unmarshal(out.Result, &pres); err != nil {
		t.Fatal(err)
	}
	if out.Status != "completed" || !res.Success || pres.Envelope == nil || pres.Envelope.Outputs["message"]["text"] != "Bob was paid 5." {
		t.Fatalf("pipeline outcome %s, %v, envelope %+v", out.Status, res.Result, pres.Envelope)
	}

	local := &ledger{path: filepath.Join(t.TempDir(), "local")}
	p, err := pipeline.FromFile("testdata/pipeline.json", pipeline.WithAgentOptions(agent.WithTools(payTools(local))))
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	want, err := p.Run(context.Background(), input, pipeline.WithStore(st))
	if err != nil {
		t.Fatal(err)
	}
	if res.TokenUsage != want.TokenUsage || len(res.Steps) != len(want.Steps) || res.Iterations != want.Iterations ||
		len(pres.Envelope.History) != len(want.Envelope.History) || res.Result.(map[string]any)["text"] != "Bob was paid 5." {
		t.Errorf("pipeline on Temporal: %+v usage, %d steps, %d hops; locally %+v, %d, %d",
			res.TokenUsage, len(res.Steps), res.Iterations, want.TokenUsage, len(want.Steps), want.Iterations)
	}
	stages, err := st.List(context.Background(), store.Filter{ParentID: runID})
	if err != nil || len(stages) != 2 {
		t.Fatalf("the stages' runs: %d (%v); want 2, children of the pipeline's", len(stages), err)
	}
	sends := l.sends(t)
	if len(sends) != 1 || !strings.HasSuffix(sends[0], ":2:0") {
		t.Errorf("payments %v; want one, by the pay stage's run", sends)
	}
	prun, err := st.Get(context.Background(), runID)
	if err != nil || prun.Kind != "pipeline" || prun.Status != store.Completed || prun.Holder != "" {
		t.Errorf("the pipeline's stored run: %+v (%v)", prun, err)
	}
}
