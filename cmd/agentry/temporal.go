package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/spf13/cobra"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/interceptor"
	tlog "go.temporal.io/sdk/log"
	"go.temporal.io/sdk/worker"

	"github.com/agentry/agentry/agent"
	"github.com/agentry/agentry/internal/journal"
	"github.com/agentry/agentry/pipeline"
	"github.com/agentry/agentry/server"
	"github.com/agentry/agentry/spec"
	"github.com/agentry/agentry/store"
	"github.com/agentry/agentry/temporal"
)

// temporalFlags say where runs go when they run on Temporal.
type temporalFlags struct {
	address   string
	namespace string
	taskQueue string
}

func (t *temporalFlags) flags(cmd *cobra.Command, required bool) {
	fl := cmd.Flags()
	usage := "run on the Temporal server at HOST:PORT (env AGENTRY_TEMPORAL)"
	if required {
		usage = "the Temporal server, HOST:PORT (env AGENTRY_TEMPORAL)"
	}
	fl.StringVar(&t.address, "temporal", os.Getenv("AGENTRY_TEMPORAL"), usage)
	fl.StringVar(&t.namespace, "namespace", envOr("AGENTRY_TEMPORAL_NAMESPACE", "default"), "the Temporal namespace (env AGENTRY_TEMPORAL_NAMESPACE)")
	fl.StringVar(&t.taskQueue, "task-queue", envOr("AGENTRY_TASK_QUEUE", "agentry"), "the Temporal task queue of agentry's workers (env AGENTRY_TASK_QUEUE)")
}

func envOr(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}

// dial connects to the Temporal server; the SDK's own logging is off
// unless the command logs. Large payloads are kept in st, the store the
// workers share (nil: none are kept, and Temporal's limits apply).
func (t *temporalFlags) dial(ctx context.Context, logger *slog.Logger, st store.Store, tel *telemetry) (client.Client, error) {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	opts := client.Options{HostPort: t.address, Namespace: t.namespace, Logger: tlog.NewStructuredLogger(logger)}
	if st != nil {
		key, err := encryptionKey() // the run logs' key seals the payloads too
		if err != nil {
			return nil, err
		}
		if opts.DataConverter, err = temporal.DataConverter(st, key); err != nil {
			return nil, err
		}
	}
	if tel != nil && tel.tracers != nil {
		// Workflows and activities traced, replay-safe, in one trace
		// with the agents' spans.
		tracing, err := temporal.Tracing(tel.tracers)
		if err != nil {
			return nil, err
		}
		opts.Interceptors = []interceptor.ClientInterceptor{tracing}
	}
	c, err := client.DialContext(ctx, opts)
	if err != nil {
		return nil, fmt.Errorf("--temporal %s: %w", t.address, err)
	}
	return c, nil
}

type workerFlags struct {
	runFlags
	temporalFlags
}

func newWorkerCmd(stderr io.Writer) *cobra.Command {
	var f workerFlags
	cmd := &cobra.Command{
		Use:   "worker",
		Short: "Run agents as Temporal workflows: a worker of a task queue",
		Long: `Run a worker of a Temporal task queue: it runs the runs started there
(agentry run --temporal, agentry serve --temporal) as workflows, each model
turn and each tool call an activity, and writes each run's log to --db, the
store every worker and server of a deployment shares (Postgres). Several
workers share the load; a run whose worker dies goes on on another. Stop it
with Ctrl-C or SIGTERM: runs in flight go on elsewhere.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runWorker(cmd.Context(), f, stderr)
		},
	}
	f.temporalFlags.flags(cmd, true)
	fl := cmd.Flags()
	fl.StringVar(&f.agents, "agents", "agents", "agents directory: the agents requests name, and agent: tools")
	fl.StringVar(&f.pricing, "pricing", os.Getenv("AGENTRY_PRICING"), "pricing file to add to the built-in table (env AGENTRY_PRICING)")
	fl.BoolVar(&f.allowPrivate, "allow-private-network", false, "let http_get and http_request reach loopback and private addresses")
	fl.StringVar(&f.logLevel, "log-level", os.Getenv("AGENTRY_LOG_LEVEL"), "log records on stderr at this level: debug, info, warn, error, off (env AGENTRY_LOG_LEVEL; off by default)")
	fl.StringVar(&f.logFormat, "log-format", os.Getenv("AGENTRY_LOG_FORMAT"), "log records as json or text (env AGENTRY_LOG_FORMAT; implies --log-level info)")
	promptsFlag(cmd, &f.prompts)
	dbFlag(cmd, &f.db)
	return cmd
}

func runWorker(ctx context.Context, f workerFlags, stderr io.Writer) error {
	if f.address == "" {
		return usageErr(errors.New("--temporal HOST:PORT is required"))
	}
	logger, err := newLogger(f.logLevel, f.logFormat, stderr)
	if err != nil {
		return usageErr(err)
	}
	st, err := openStore(ctx, f.db)
	if err != nil {
		return usageErr(err)
	}
	defer st.Close()
	opts, err := storedAgentOptions(f.runFlags, stderr)
	if err != nil {
		return usageErr(err)
	}
	so, err := storeOptions(st, f.prompts)
	if err != nil {
		return usageErr(err)
	}
	opts = append(opts, so...)
	tel, err := openTelemetry(ctx)
	if err != nil {
		return usageErr(err)
	}
	defer tel.shutdown()
	opts = append(opts, tel.agentOptions()...)
	c, err := f.dial(ctx, logger, st, tel)
	if err != nil {
		return runFailed(err)
	}
	defer c.Close()
	w := worker.New(c, f.taskQueue, temporal.WorkerOptions())
	key, err := encryptionKey()
	if err != nil {
		return usageErr(err)
	}
	if err := temporal.Register(w, temporal.Config{Store: st, Agents: f.agents, Options: opts, EncryptionKey: key}); err != nil {
		return usageErr(err)
	}
	if err := w.Start(); err != nil {
		return runFailed(fmt.Errorf("worker: %w", err))
	}
	fmt.Fprintf(stderr, "agentry worker: task queue %s on %s (namespace %s), runs stored in %s\n", f.taskQueue, f.address, f.namespace, redactDSN(f.db))
	ctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	defer stop()
	<-ctx.Done()
	w.Stop()
	return nil
}

// runOnTemporal submits an agent's run to Temporal and, unless
// --detach, waits for it and prints its Result as a local run does.
func runOnTemporal(ctx context.Context, target string, f runFlags, t temporalFlags, detach bool, stdout, stderr io.Writer) error {
	if err := temporalOnly(f); err != nil {
		return err
	}
	req, err := temporalRequest(target, f)
	if err != nil {
		return usageErr(err)
	}
	c, runID, done, err := submit(ctx, f, t, stderr, func(c client.Client) (string, error) {
		return temporal.Start(ctx, c, t.taskQueue, req)
	})
	if err != nil {
		return err
	}
	defer done()
	if detach {
		fmt.Fprintln(stdout, runID)
		return nil
	}
	if !f.quiet {
		fmt.Fprintf(stderr, "▶ run %s on Temporal (task queue %s)\n", runID, t.taskQueue)
	}
	return waitOnTemporal(ctx, c, runID, 0, f, stdout, stderr)
}

// submit starts a run with start, on a client of t whose large payloads
// are kept in the store of --db (the workers'); done closes both.
func submit(ctx context.Context, f runFlags, t temporalFlags, stderr io.Writer, start func(client.Client) (string, error)) (
	c client.Client, runID string, done func(), err error) {
	logger, err := newLogger(f.logLevel, f.logFormat, stderr)
	if err != nil {
		return nil, "", nil, usageErr(err)
	}
	st, err := openStore(ctx, f.db)
	if err != nil {
		return nil, "", nil, usageErr(err)
	}
	if c, err = t.dial(ctx, logger, st, nil); err != nil {
		st.Close()
		return nil, "", nil, runFailed(err)
	}
	done = func() { c.Close(); st.Close() }
	if runID, err = start(c); err != nil {
		done()
		return nil, "", nil, runFailed(err)
	}
	return c, runID, done, nil
}

// waitOnTemporal waits for the run's workflow and prints its Result as
// a local run does, with the same exit code.
func waitOnTemporal(ctx context.Context, c client.Client, runID string, after int, f runFlags, stdout, stderr io.Writer) error {
	ctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	defer stop()
	out, err := temporal.Await(ctx, c, runID, after)
	if ctx.Err() != nil {
		// Ctrl-C stops waiting, not the run: it goes on on the workers.
		fmt.Fprintf(stderr, "stopped waiting: run %s goes on (agentry runs, trace, or abort it with POST /v1/runs/%s/abort)\n", runID, runID)
		return runFailed(ctx.Err())
	}
	if err != nil {
		return runFailed(err)
	}
	var res agent.Result
	if err := json.Unmarshal(out.Result, &res); err != nil {
		return runFailed(fmt.Errorf("run %s: its Result: %w", runID, err))
	}
	var runErr error
	if !res.Success {
		runErr = resultError(&res)
	}
	return finishRun(f.json, "", nil, stdout, out.Result, func() {
		if res.Success {
			printAnswer(stdout, res.Result)
		}
		printPause(stdout, &res, "--temporal")
	}, runErr)
}

// resultError is the error a failed Result reports.
func resultError(res *agent.Result) error {
	if res.Error == nil {
		return fmt.Errorf("run %s ended %s", res.ID, res.TerminateReason)
	}
	switch res.Error.Code {
	case agent.CodeConfigError:
		return fmt.Errorf("%w: %s", agent.ErrConfig, res.Error.Message)
	case agent.CodeAwaitingApproval:
		return fmt.Errorf("%w: %s", agent.ErrAwaitingApproval, res.Error.Message)
	}
	return errors.New(res.Error.Message)
}

// temporalRequest is the Request of a run of target: its spec as the
// submitter reads it, with the directory its relative paths start from.
func temporalRequest(target string, f runFlags) (temporal.Request, error) {
	input, err := readInput(f)
	if err != nil {
		return temporal.Request{}, err
	}
	path := target
	if st, err := os.Stat(target); err != nil || st.IsDir() {
		if strings.HasSuffix(target, ".json") || strings.ContainsRune(target, filepath.Separator) {
			return temporal.Request{}, fmt.Errorf("spec file %s does not exist", target)
		}
		if _, path, err = (spec.Dir{Path: f.agents}).Load(target); err != nil {
			return temporal.Request{}, err
		}
	}
	sp, err := spec.Load(path)
	if err != nil {
		return temporal.Request{}, err
	}
	b, err := json.Marshal(sp)
	if err != nil {
		return temporal.Request{}, err
	}
	dir, err := filepath.Abs(filepath.Dir(path))
	if err != nil {
		return temporal.Request{}, err
	}
	req := temporal.Request{Spec: b, BaseDir: dir, Input: input, UserID: f.user, CorrelationID: f.correlation,
		TraceParent: f.traceParent, TraceState: f.traceState}
	if f.model != "" {
		req.Model = modelName(f.model)
	}
	return req, nil
}

// decideOnTemporal resumes a run Temporal drives the only way it can
// be: its workflow is given the decisions, and the command waits for it
// as run --temporal does.
func decideOnTemporal(ctx context.Context, st store.Store, runID, driver string, f resumeFlags, stdout, stderr io.Writer) error {
	if f.temporal.address == "" {
		return usageErr(fmt.Errorf("run %s is driven by Temporal (%s): give --temporal HOST:PORT to decide it there", runID, driver))
	}
	if ns, _, _ := strings.Cut(strings.TrimPrefix(driver, "temporal:"), "/"); ns != f.temporal.namespace {
		return usageErr(fmt.Errorf("run %s is driven in Temporal namespace %s, not %s (--namespace)", runID, ns, f.temporal.namespace))
	}
	if f.model != "" {
		return usageErr(fmt.Errorf("--model: run %s goes on with its own model on Temporal", runID))
	}
	logger, err := newLogger(f.logLevel, f.logFormat, stderr)
	if err != nil {
		return usageErr(err)
	}
	c, err := f.temporal.dial(ctx, logger, st, nil)
	if err != nil {
		return runFailed(err)
	}
	defer c.Close()
	p, err := temporal.Query(ctx, c, runID)
	if err != nil {
		return runFailed(err)
	}
	if len(f.approve)+len(f.deny) > 0 {
		d := temporal.Decision{Approve: f.approve, Deny: f.deny, Reason: f.reason, By: f.user}
		if err := temporal.Decide(ctx, c, runID, d); err != nil {
			return usageErr(err)
		}
	}
	if !f.quiet {
		fmt.Fprintf(stderr, "↻ run %s goes on on Temporal\n", runID)
	}
	return waitOnTemporal(ctx, c, runID, p.Pauses, f.runFlags, stdout, stderr)
}

// temporalRemote is the server's Remote on Temporal: agentry serve
// --temporal starts runs there, for agentry worker to run.
type temporalRemote struct {
	c client.Client
	t temporalFlags
}

func (r temporalRemote) Start(ctx context.Context, rr server.RemoteRun) (string, error) {
	return temporal.Start(ctx, r.c, r.t.taskQueue, temporal.Request{Agent: rr.Agent, Spec: rr.Spec, Model: rr.Model, Input: rr.Input,
		Conversation: rr.Conversation, UserID: rr.UserID, Roles: rr.Roles, TraceParent: rr.TraceParent, TraceState: rr.TraceState, Metadata: rr.Metadata})
}

func (r temporalRemote) Decide(ctx context.Context, runID string, approve, deny []string, reason, by string) error {
	return temporal.Decide(ctx, r.c, runID, temporal.Decision{Approve: approve, Deny: deny, Reason: reason, By: by})
}

func (r temporalRemote) Starting(ctx context.Context, runID string) bool {
	return temporal.Running(ctx, r.c, runID)
}

func (r temporalRemote) Abort(ctx context.Context, runID string) error {
	return temporal.Abort(ctx, r.c, runID)
}

func (r temporalRemote) Wait(ctx context.Context, runID string) error {
	_, err := temporal.Wait(ctx, r.c, runID)
	return err
}

func (r temporalRemote) Drives(driver string) bool {
	return driver == "temporal:"+r.t.namespace || strings.HasPrefix(driver, "temporal:"+r.t.namespace+"/")
}

// runPipelineOnTemporal submits a pipeline's run to Temporal, each stage
// a run of its own there, and, unless --detach, waits for it and prints
// it as a local pipeline run does.
func runPipelineOnTemporal(ctx context.Context, path string, f runFlags, t temporalFlags, detach bool, stdout, stderr io.Writer) error {
	if err := temporalOnly(f); err != nil {
		return err
	}
	input, err := readInput(f)
	if err != nil {
		return usageErr(err)
	}
	def, err := pipeline.Load(path)
	if err != nil {
		return usageErr(err)
	}
	b, err := json.Marshal(def)
	if err != nil {
		return usageErr(err)
	}
	dir, err := filepath.Abs(filepath.Dir(path))
	if err != nil {
		return usageErr(err)
	}
	req := temporal.PipelineRequest{Definition: b, BaseDir: dir, Input: input, UserID: f.user, CorrelationID: f.correlation,
		TraceParent: f.traceParent, TraceState: f.traceState}
	if f.agentsSet {
		req.AgentsDir = journal.AbsDir(f.agents)
	}
	c, runID, done, err := submit(ctx, f, t, stderr, func(c client.Client) (string, error) {
		return temporal.StartPipeline(ctx, c, t.taskQueue, req)
	})
	if err != nil {
		return err
	}
	defer done()
	if detach {
		fmt.Fprintln(stdout, runID)
		return nil
	}
	if !f.quiet {
		fmt.Fprintf(stderr, "▶ pipeline %s@%s, run %s on Temporal (task queue %s)\n", def.PipelineName, def.Version, runID, t.taskQueue)
	}
	ctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	defer stop()
	out, err := temporal.Wait(ctx, c, runID)
	if ctx.Err() != nil {
		fmt.Fprintf(stderr, "stopped waiting: run %s goes on\n", runID)
		return runFailed(ctx.Err())
	}
	if err != nil {
		return runFailed(err)
	}
	var res pipeline.Result
	if err := json.Unmarshal(out.Result, &res); err != nil {
		return runFailed(fmt.Errorf("run %s: its Result: %w", runID, err))
	}
	var runErr error
	if !res.Success && res.Error != nil {
		runErr = resultError(&res.Result)
	}
	return pausedPipeline(finishRun(f.json, "", nil, stdout, out.Result, func() { printPipelineAnswer(stdout, &res) }, runErr), &res)
}

// temporalOnly refuses the flags that do not apply to a run on Temporal.
func temporalOnly(f runFlags) error {
	for _, flag := range []struct {
		name string
		set  bool
	}{{"--seed", f.seedSet}, {"--now", f.now != ""}, {"--record", f.record != ""}, {"--events", f.events != ""},
		{"--no-store", f.noStore}, {"--trace-id (give --traceparent)", f.traceID != ""}, {"--resume", f.resume != ""}} {
		if flag.set {
			return usageErr(fmt.Errorf("%s does not apply to a run on Temporal", flag.name))
		}
	}
	return nil
}
