package temporal

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.temporal.io/api/enums/v1"
	historypb "go.temporal.io/api/history/v1"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/interceptor"
	"go.temporal.io/sdk/log"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"
	"google.golang.org/protobuf/encoding/protojson"

	"github.com/agentry/agentry/agent"
	"github.com/agentry/agentry/event"
	"github.com/agentry/agentry/internal/testdb"
	"github.com/agentry/agentry/internal/teststore"
	"github.com/agentry/agentry/runlog"
	"github.com/agentry/agentry/store"
)

var update = flag.Bool("update", false, "record the workflow histories in testdata/history again")

// startWorker runs a worker of queue in this process until the test ends.
func startWorker(t *testing.T, c client.Client, queue string, st store.Store, l *ledger) {
	t.Helper()
	w := worker.New(c, queue, WorkerOptions())
	if err := Register(w, Config{Store: st, Options: []agent.Option{agent.WithTools(payTools(l))}}); err != nil {
		t.Fatal(err)
	}
	if err := w.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(w.Stop)
}

// Runs on a real Temporal server: a run, a run that waits for a person's
// approval, a run aborted while it waits. Their histories are what the
// replay tests play (go test -run TestOnServer -update records them).
func TestOnServer(t *testing.T) {
	_, c := testdb.Temporal(t)
	st := teststore.Open(t)
	l := &ledger{path: filepath.Join(t.TempDir(), "ledger")}
	const queue = "agentry-test"
	startWorker(t, c, queue, st, l)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	t.Run("run", func(t *testing.T) {
		id, err := Start(ctx, c, queue, request(t, "payer.json"))
		if err != nil {
			t.Fatal(err)
		}
		out, err := Wait(ctx, c, id)
		if err != nil {
			t.Fatal(err)
		}
		var res agent.Result
		if err := json.Unmarshal(out.Result, &res); err != nil || out.Status != "completed" || res.Result != "Paid bob 5." {
			t.Fatalf("outcome %+v (%v)", out, err)
		}
		if sends := l.sends(t); !slices.Contains(sends, id+":2:0") {
			t.Errorf("no payment with key %s:2:0 in %v", id, sends)
		}
		p, err := Query(ctx, c, id)
		if err != nil || p.Status != "completed" || p.Turn != 3 || p.Tokens != 239 || p.ToolCalls != 3 {
			t.Errorf("progress of the ended run: %+v (%v)", p, err)
		}
		keep(t, c, id, "payer")
	})

	t.Run("approval", func(t *testing.T) {
		id, err := Start(ctx, c, queue, request(t, "approver.json"))
		if err != nil {
			t.Fatal(err)
		}
		paused, err := Await(ctx, c, id, 0)
		if err != nil || paused.Status != "awaiting_approval" {
			t.Fatalf("the pause: %+v (%v)", paused, err)
		}
		// A paused run's workflow goes on (it waits for the decision): a
		// server asked for its id watches it; an id no workflow has is not.
		if !Running(ctx, c, id) || Running(ctx, c, "run_no_such_workflow") {
			t.Errorf("Running: the paused run's %v, no run's %v", Running(ctx, c, id), Running(ctx, c, "run_no_such_workflow"))
		}
		var pres agent.Result
		if json.Unmarshal(paused.Result, &pres); pres.TerminateReason != agent.ReasonAwaitingApproval || pres.Error == nil ||
			pres.Error.Code != agent.CodeAwaitingApproval || pres.Metrics.ToolErrors != 1 || pres.Metrics.ToolCalls != 3 {
			t.Errorf("the paused Result: %s, %+v, %d tool calls, %d errors; want a pause's (3 calls, the held one the error)",
				pres.TerminateReason, pres.Error, pres.Metrics.ToolCalls, pres.Metrics.ToolErrors)
		}
		p := waitFor(t, c, id, func(p *Progress) bool { return p.Status == "awaiting_approval" })
		if len(p.Waiting) != 1 || p.Waiting[0].Key != id+":2:0" || p.Waiting[0].Tool != "pay" {
			t.Fatalf("waiting calls %+v", p.Waiting)
		}
		if run, err := st.Get(ctx, id); err != nil || run.Status != store.AwaitingApproval {
			t.Errorf("the stored run waits? %+v (%v)", run, err)
		}
		if err := Decide(ctx, c, id, Decision{Approve: []string{"nope"}}); err == nil || !strings.Contains(err.Error(), id+":2:0") {
			t.Errorf("a decision on no waiting call: %v; want a refusal naming the waiting call", err)
		}
		if err := Decide(ctx, c, id, Decision{Approve: []string{p.Waiting[0].CallID}, By: "bob"}); err != nil {
			t.Fatal(err)
		}
		if err := Decide(ctx, c, id, Decision{Approve: []string{id + ":2:0"}}); err == nil {
			t.Error("a second decision before the run waits again was taken")
		}
		out, err := Wait(ctx, c, id)
		if err != nil || out.Status != "completed" {
			t.Fatalf("outcome %+v (%v)", out, err)
		}
		l, err := runlog.Read(ctx, st, id)
		if err != nil {
			t.Fatal(err)
		}
		evs, _ := l.Events()
		ends := map[string]int{}
		for _, e := range evs {
			if e.Type == event.ToolCallEnd {
				ends[e.Tool.Name]++
			}
		}
		if ends["pay"] != 1 || ends["add"] != 2 {
			t.Errorf("tool_call_end events %v; want each call's once", ends)
		}
		keep(t, c, id, "approval")
	})

	t.Run("pipeline", func(t *testing.T) {
		def, err := os.ReadFile("testdata/pipeline.json")
		if err != nil {
			t.Fatal(err)
		}
		dir, _ := filepath.Abs("testdata")
		id, err := StartPipeline(ctx, c, queue, PipelineRequest{Definition: def, BaseDir: dir, Input: map[string]any{"task": "pay bob what 2 + 3 makes"}})
		if err != nil {
			t.Fatal(err)
		}
		out, err := Wait(ctx, c, id)
		if err != nil || out.Status != "completed" {
			t.Fatalf("pipeline outcome %+v (%v)", out, err)
		}
		keep(t, c, id, "pipeline")
	})

	t.Run("abort", func(t *testing.T) {
		id, err := Start(ctx, c, queue, request(t, "approver.json"))
		if err != nil {
			t.Fatal(err)
		}
		waitFor(t, c, id, func(p *Progress) bool { return p.Status == "awaiting_approval" })
		if err := Abort(ctx, c, id); err != nil {
			t.Fatal(err)
		}
		out, err := Wait(ctx, c, id)
		if err != nil || out.Status != "aborted" {
			t.Fatalf("outcome %+v (%v)", out, err)
		}
		if run, err := st.Get(ctx, id); err != nil || run.Status != store.Aborted {
			t.Errorf("stored run %+v (%v); want aborted", run, err)
		}
		keep(t, c, id, "abort")
	})
}

// waitFor queries the run until ok says it stands where the test wants.
func waitFor(t *testing.T, c client.Client, id string, ok func(*Progress) bool) *Progress {
	t.Helper()
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(50 * time.Millisecond) {
		p, err := Query(context.Background(), c, id)
		if err == nil && ok(p) {
			return p
		}
		if time.Now().After(deadline) {
			t.Fatalf("run %s: last progress %+v (%v)", id, p, err)
		}
	}
}

// keep writes the run's workflow history to testdata/history when the
// tests run with -update.
func keep(t *testing.T, c client.Client, id, name string) {
	t.Helper()
	if !*update {
		return
	}
	var h historypb.History
	it := c.GetWorkflowHistory(context.Background(), id, "", false, enums.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	for it.HasNext() {
		e, err := it.Next()
		if err != nil {
			t.Fatal(err)
		}
		h.Events = append(h.Events, e)
	}
	b, err := protojson.MarshalOptions{Indent: " "}.Marshal(&h)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join("testdata", "history", fmt.Sprintf("v%d-%s.json", latest, name))
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

// The histories recorded by earlier releases of the workflow replay with
// this one's code: a run they started finishes on this release. Code
// that schedules something else where a history says otherwise fails
// its replay.
func TestReplay(t *testing.T) {
	files, _ := filepath.Glob(filepath.Join("testdata", "history", "*.json"))
	if len(files) < 7 {
		t.Fatalf("testdata/history holds %d histories; record them with go test -run TestOnServer -update", len(files))
	}
	quiet := log.NewStructuredLogger(slog.New(slog.DiscardHandler))
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			r := worker.NewWorkflowReplayer()
			r.RegisterWorkflowWithOptions(run, workflow.RegisterOptions{Name: WorkflowName})
			r.RegisterWorkflowWithOptions(runPipeline, workflow.RegisterOptions{Name: PipelineWorkflowName})
			if err := r.ReplayWorkflowHistoryFromJSONFile(quiet, f); err != nil {
				t.Errorf("the history recorded by an earlier release does not replay: %v", err)
			}
			// The same history against a workflow that plans with another
			// activity must fail: the replay checks what it claims to.
			changed := worker.NewWorkflowReplayer()
			changed.RegisterWorkflowWithOptions(func(ctx workflow.Context, req Request, c *Carried) (*Outcome, error) {
				ctx = workflow.WithActivityOptions(ctx, workflow.ActivityOptions{StartToCloseTimeout: time.Minute})
				workflow.GetVersion(ctx, changeID, workflow.DefaultVersion, latest)
				var out advanceOut
				err := workflow.ExecuteActivity(ctx, "agentry.Plan", advanceIn{}).Get(ctx, &out)
				return nil, err
			}, workflow.RegisterOptions{Name: WorkflowName})
			changed.RegisterWorkflowWithOptions(func(ctx workflow.Context, req PipelineRequest) (*Outcome, error) {
				ctx = workflow.WithActivityOptions(ctx, workflow.ActivityOptions{StartToCloseTimeout: time.Minute})
				workflow.GetVersion(ctx, "agentry.pipeline", workflow.DefaultVersion, 1)
				return nil, workflow.ExecuteActivity(ctx, "agentry.Plan", pipelineIn{}).Get(ctx, nil)
			}, workflow.RegisterOptions{Name: PipelineWorkflowName})
			if err := changed.ReplayWorkflowHistoryFromJSONFile(quiet, f); err == nil {
				t.Error("a workflow that schedules another activity replayed the history without error")
			}
		})
	}
}

// A run started by the previous release's workflow code finishes on this
// release's: runs begun by a worker of the first release (its workflow,
// frozen in v1_test.go) wait for approval; that worker stops; a worker of
// this release takes them over, and they finish, each effect once.
func TestUpgrade(t *testing.T) {
	_, c := testdb.Temporal(t)
	st := teststore.Open(t)
	l := &ledger{path: filepath.Join(t.TempDir(), "ledger")}
	const queue = "agentry-upgrade"
	opts := Config{Store: st, Options: []agent.Option{agent.WithTools(payTools(l))}}
	old := worker.New(c, queue, worker.Options{Identity: "release-1", DeadlockDetectionTimeout: WorkerOptions().DeadlockDetectionTimeout})
	x := &activities{cfg: opts}
	old.RegisterWorkflowWithOptions(runV1, workflow.RegisterOptions{Name: WorkflowName})
	old.RegisterActivityWithOptions(x.advance, activity.RegisterOptions{Name: AdvanceName})
	old.RegisterActivityWithOptions(x.tool, activity.RegisterOptions{Name: ToolName})
	if err := old.Start(); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var ids []string
	for range 3 {
		id, err := Start(ctx, c, queue, request(t, "approver.json"))
		if err != nil {
			t.Fatal(err)
		}
		waitFor(t, c, id, func(p *Progress) bool { return p.Status == "awaiting_approval" })
		ids = append(ids, id)
	}
	old.Stop()

	startWorker(t, c, queue, st, l)
	for _, id := range ids {
		if err := Decide(ctx, c, id, Decision{Approve: []string{id + ":2:0"}}); err != nil {
			t.Fatal(err)
		}
		out, err := Wait(ctx, c, id)
		if err != nil || out.Status != "completed" {
			t.Fatalf("run %s: %+v (%v)", id, out, err)
		}
		by := map[bool]bool{}
		it := c.GetWorkflowHistory(ctx, id, "", false, enums.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
		for it.HasNext() {
			e, err := it.Next()
			if err != nil {
				t.Fatal(err)
			}
			if a := e.GetWorkflowTaskCompletedEventAttributes(); a != nil {
				by[a.GetIdentity() == "release-1"] = true
			}
		}
		if !by[true] || !by[false] {
			t.Errorf("run %s's workflow tasks were completed by release 1: %v, by this release: %v; want both", id, by[true], by[false])
		}
	}
	sends := l.sends(t)
	for _, id := range ids {
		if n := slices.Index(sends, id+":2:0"); n < 0 || slices.Index(sends[n+1:], id+":2:0") >= 0 {
			t.Errorf("run %s's payment was made %d times", id, strings.Count(strings.Join(sends, "\n"), id+":2:0"))
		}
	}
}

// On a real server, whose history refuses payloads over 2 MiB, a run
// with a 3 MB tool result and a 300 KB input goes through: the data
// converter keeps them in the run store.
func TestOnServerLargePayloads(t *testing.T) {
	_, plain := testdb.Temporal(t)
	st := teststore.Open(t)
	c, err := client.NewClientFromExisting(plain, client.Options{DataConverter: blobsOnly(t, st),
		Logger: log.NewStructuredLogger(slog.New(slog.DiscardHandler))})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	const queue = "agentry-large"
	startWorker(t, c, queue, st, &ledger{path: filepath.Join(t.TempDir(), "ledger")})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	req := request(t, "big.json")
	req.Input = map[string]any{"task": strings.Repeat("long input ", 30_000)}
	id, err := Start(ctx, c, queue, req)
	if err != nil {
		t.Fatal(err)
	}
	out, err := Wait(ctx, c, id)
	if err != nil || out.Status != "completed" {
		t.Fatalf("outcome %+v (%v)", out, err)
	}
	l, err := runlog.Read(ctx, st, id)
	if err != nil {
		t.Fatal(err)
	}
	if rec := l.Results[id+":1:0"]; rec == nil || rec.Error != nil || rec.Output == nil || len(*rec.Output) != 3_000_002 {
		t.Errorf("the 3 MB result did not come through whole: %+v", rec)
	}
}

// Spans through Temporal's OpenTelemetry interceptor are replay-safe:
// with no workflow cached, each workflow task replays the run from its
// start, and still each activity is started once in the trace; the
// agent's own spans (invoke_agent, chat, execute_tool) are children of
// the activities that ran them, in one trace with the client's.
func TestOnServerTracing(t *testing.T) {
	_, plain := testdb.Temporal(t)
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	defer tp.Shutdown(context.Background())
	tracing, err := Tracing(tp)
	if err != nil {
		t.Fatal(err)
	}
	c, err := client.NewClientFromExisting(plain, client.Options{Interceptors: []interceptor.ClientInterceptor{tracing},
		Logger: log.NewStructuredLogger(slog.New(slog.DiscardHandler))})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	st := teststore.Open(t)
	l := &ledger{path: filepath.Join(t.TempDir(), "ledger")}
	const queue = "agentry-traced"
	w := worker.New(c, queue, WorkerOptions())
	if err := Register(w, Config{Store: st, Options: []agent.Option{agent.WithTools(payTools(l)), agent.WithTracerProvider(tp)}}); err != nil {
		t.Fatal(err)
	}
	if err := w.Start(); err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	id, err := Start(ctx, c, queue, request(t, "payer.json"))
	if err != nil {
		t.Fatal(err)
	}
	if out, err := Wait(ctx, c, id); err != nil || out.Status != "completed" {
		t.Fatalf("outcome %+v (%v)", out, err)
	}
	tp.ForceFlush(ctx)
	count := map[string]int{}
	byID := map[string]sdktrace.ReadOnlySpan{}
	for _, s := range rec.Ended() {
		count[s.Name()]++
		byID[s.SpanContext().SpanID().String()] = s
	}
	// Three turns: three planning activities; three calls.
	for name, want := range map[string]int{"StartActivity:" + AdvanceName: 3, "RunActivity:" + AdvanceName: 3,
		"StartActivity:" + ToolName: 3, "RunActivity:" + ToolName: 3, "StartWorkflow:" + WorkflowName: 1, "RunWorkflow:" + WorkflowName: 0} {
		if count[name] != want {
			t.Errorf("%d spans %s; want %d (spans: %v)", count[name], name, want, count)
		}
	}
	trace := ""
	for _, s := range rec.Ended() {
		if trace == "" {
			trace = s.SpanContext().TraceID().String()
		}
		if s.SpanContext().TraceID().String() != trace {
			t.Errorf("span %s is in trace %s, not the run's %s", s.Name(), s.SpanContext().TraceID(), trace)
		}
		if strings.HasPrefix(s.Name(), "execute_tool") {
			parent := byID[s.Parent().SpanID().String()]
			if parent == nil || parent.Name() != "RunActivity:"+ToolName {
				t.Errorf("%s's parent is %v; want the call's activity", s.Name(), parent)
			}
		}
		if strings.HasPrefix(s.Name(), "invoke_agent") {
			parent := byID[s.Parent().SpanID().String()]
			if parent == nil || parent.Name() != "RunActivity:"+AdvanceName {
				t.Errorf("invoke_agent's parent is %v; want a planning activity", parent)
			}
		}
	}
	// One execute_tool span a call, where it ran (the replays of turns
	// by later planning activities trace nothing again).
	if count["invoke_agent payer"] != 3 || count["execute_tool pay"] != 1 || count["execute_tool add"] != 2 {
		t.Errorf("agent spans: %v", count)
	}
}

// A run whose history grows past its limit continues as new: the next
// workflow of the chain goes on with the results and the decision it is
// handed, and the run ends as it would in one workflow.
func TestOnServerContinueAsNew(t *testing.T) {
	was := continueAfter
	t.Cleanup(func() { continueAfter = was }) // after the worker stops (cleanups run last first)
	continueAfter = 12                        // a few activities a workflow
	_, c := testdb.Temporal(t)
	st := teststore.Open(t)
	l := &ledger{path: filepath.Join(t.TempDir(), "ledger")}
	const queue = "agentry-continued"
	startWorker(t, c, queue, st, l)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	id, err := Start(ctx, c, queue, request(t, "payer.json"))
	if err != nil {
		t.Fatal(err)
	}
	out, err := Wait(ctx, c, id)
	if err != nil || out.Status != "completed" {
		t.Fatalf("outcome %+v (%v)", out, err)
	}
	var res agent.Result
	json.Unmarshal(out.Result, &res)
	if res.Result != "Paid bob 5." || len(res.Steps) != 3 || res.TokenUsage.TotalTokens != 239 {
		t.Errorf("Result of the continued run: %v, %d steps, %d tokens", res.Result, len(res.Steps), res.TokenUsage.TotalTokens)
	}
	if sends := l.sends(t); !slices.Equal(sends, []string{id + ":2:0"}) {
		t.Errorf("payments %v; want one", sends)
	}
	// The chain: the first workflow continued as new at least once.
	first, err := c.DescribeWorkflowExecution(ctx, id, "")
	if err != nil {
		t.Fatal(err)
	}
	if got := first.GetWorkflowExecutionInfo().GetExecution().GetRunId(); got == "" {
		t.Fatal("no execution")
	}
	runs := 0
	it, err := c.ListWorkflow(ctx, &workflowservice.ListWorkflowExecutionsRequest{Query: "WorkflowId = '" + id + "'"})
	if err == nil {
		runs = len(it.GetExecutions())
	}
	if runs < 2 {
		t.Errorf("the run's workflow ran as %d executions; want it continued as new", runs)
	}
}

// A run aborted before any worker began it ends aborted, on record,
// once a worker takes it.
func TestOnServerEarlyAbort(t *testing.T) {
	_, c := testdb.Temporal(t)
	st := teststore.Open(t)
	const queue = "agentry-early"
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	id, err := Start(ctx, c, queue, request(t, "payer.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := Abort(ctx, c, id); err != nil {
		t.Fatal(err)
	}
	l := &ledger{path: filepath.Join(t.TempDir(), "ledger")}
	startWorker(t, c, queue, st, l)
	out, err := Wait(ctx, c, id)
	if err != nil || out.Status != "aborted" {
		t.Fatalf("outcome %+v (%v)", out, err)
	}
	if run, err := st.Get(ctx, id); err != nil || run.Status != store.Aborted {
		t.Errorf("stored run %+v (%v)", run, err)
	}
	if sends := l.sends(t); len(sends) != 0 {
		t.Errorf("payments %v", sends)
	}
}

// A pipeline's workflow cancelled while a stage's run waits for a
// person ends the pipeline's run aborted, on record, and the stage's too.
func TestOnServerPipelineAbort(t *testing.T) {
	_, c := testdb.Temporal(t)
	st := teststore.Open(t)
	l := &ledger{path: filepath.Join(t.TempDir(), "ledger")}
	const queue = "agentry-pipeline-abort"
	startWorker(t, c, queue, st, l)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	def, err := os.ReadFile("testdata/pipeline_approval.json")
	if err != nil {
		t.Fatal(err)
	}
	dir, _ := filepath.Abs("testdata")
	id, err := StartPipeline(ctx, c, queue, PipelineRequest{Definition: def, BaseDir: dir, Input: map[string]any{"task": "pay bob"}})
	if err != nil {
		t.Fatal(err)
	}
	var stage string
	for deadline := time.Now().Add(time.Minute); stage == ""; time.Sleep(50 * time.Millisecond) {
		if runs, _ := st.List(ctx, store.Filter{ParentID: id}); len(runs) == 1 && runs[0].Status == store.AwaitingApproval {
			stage = runs[0].ID
		}
		if time.Now().After(deadline) {
			t.Fatal("the stage's run never waited")
		}
	}
	if err := Abort(ctx, c, id); err != nil {
		t.Fatal(err)
	}
	out, err := Wait(ctx, c, id)
	if err != nil || out.Status != "aborted" {
		t.Fatalf("pipeline outcome %+v (%v)", out, err)
	}
	run, err := st.Get(ctx, id)
	if err != nil || run.Status != store.Aborted || run.Holder != "" {
		t.Errorf("the pipeline's stored run: %+v (%v)", run, err)
	}
	if srun, err := st.Get(ctx, stage); err != nil || srun.Status != store.Aborted {
		t.Errorf("the stage's run: %+v (%v); want aborted", srun, err)
	}
	if sends := l.sends(t); len(sends) != 0 {
		t.Errorf("payments %v", sends)
	}
}
