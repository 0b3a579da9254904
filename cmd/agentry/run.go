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
	"time"

	"github.com/spf13/cobra"

	"github.com/agentry/agentry/agent"
	"github.com/agentry/agentry/event"
	"github.com/agentry/agentry/llm"
	"github.com/agentry/agentry/llm/scripted"
	"github.com/agentry/agentry/pipeline"
	"github.com/agentry/agentry/spec"
	"github.com/agentry/agentry/store"
)

type runFlags struct {
	agents       string
	inputs       []string
	inputFile    string
	model        string
	unlisted     bool     // --model-unlisted
	roles        []string // --model-role ROLE=MODEL
	json         bool
	events       string
	quiet        bool
	pricing      string
	allowPrivate bool
	record       string
	resume       string
	agentsSet    bool
	user         string
	correlation  string
	traceID      string
	traceParent  string
	traceState   string
	seed         int64
	seedSet      bool
	now          string
	logLevel     string
	logFormat    string
	db           string
	noStore      bool
	prompts      string
}

func newRunCmd(stdout, stderr io.Writer) *cobra.Command {
	var f runFlags
	var t temporalFlags
	var detach bool
	cmd := &cobra.Command{
		Use:   "run SPEC|PIPELINE|NAME[@VERSION]",
		Short: "Run an agent or a pipeline and print its answer",
		Long: `Run an agent from a spec file, or by name from an agents directory laid out as
{agent_name}/{version}.json (the latest version when none is given), or a
pipeline from its definition file (one with "pipeline_name").
Progress goes to stderr as it happens; the answer (or, with --json, the whole
result) goes to stdout. Exit codes: 0 success, 1 the run failed, 2 bad usage,
spec or input, 3 the run waits for approval (or a paused pipeline for an
answer): the commands that decide it are printed.`,
		Args: func(_ *cobra.Command, args []string) error {
			if len(args) != 1 {
				return usageErr(fmt.Errorf("run takes one spec file or agent name, got %d arguments", len(args)))
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			f.agentsSet = cmd.Flags().Changed("agents")
			f.seedSet = cmd.Flags().Changed("seed")
			data, err := os.ReadFile(args[0])
			isPipeline := err == nil && pipeline.IsPipeline(data)
			switch {
			case len(f.roles) > 0 && !isPipeline:
				return usageErr(fmt.Errorf("--model-role sets the model of a pipeline's stages; %s is an agent (give it --model)", args[0]))
			case len(f.roles) > 0 && t.address != "":
				return usageErr(errors.New("--model-role: a pipeline on Temporal takes the roles of its definition (model_roles)"))
			case t.address != "" && isPipeline:
				return runPipelineOnTemporal(cmd.Context(), args[0], f, t, detach, stdout, stderr)
			case t.address != "":
				return runOnTemporal(cmd.Context(), args[0], f, t, detach, stdout, stderr)
			case detach:
				return usageErr(errors.New("--detach returns at once from a run on Temporal: give --temporal"))
			case isPipeline:
				return runPipeline(cmd.Context(), args[0], f, stdout, stderr)
			}
			if f.resume != "" {
				return usageErr(fmt.Errorf("--resume continues a pipeline; %s is not a pipeline definition", args[0]))
			}
			return runAgent(cmd.Context(), args[0], f, stdout, stderr)
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&f.agents, "agents", "agents", "agents directory for NAME[@VERSION] and agent: tools")
	fl.StringArrayVar(&f.inputs, "input", nil, "input value as key=value (repeatable)")
	fl.StringVar(&f.inputFile, "input-file", "", "JSON object file with the input")
	fl.StringVar(&f.model, "model", "", "model to use instead of the spec's model_name (PROVIDER:MODEL)")
	fl.StringArrayVar(&f.roles, "model-role", nil, "a pipeline's role and the model of its stages, ROLE=PROVIDER:MODEL, over its model_roles (repeatable)")
	fl.BoolVar(&f.unlisted, "model-unlisted", false, "--model is not in its provider's catalog on purpose (a fine-tuned id, a model newer than this release): do not refuse it as misspelt")
	outputFlags(cmd, &f)
	fl.StringVar(&f.record, "record", "", "write the run's model turns to FILE as a scripted model (replay with --model scripted:FILE)")
	fl.StringVar(&f.resume, "resume", "", "continue a paused pipeline from FILE (its --json result or envelope); --input values are the answer")
	fl.StringVar(&f.user, "user", "", "the id of the user the run acts for (tools read it from their context)")
	fl.StringVar(&f.correlation, "correlation-id", "", "an id that ties the run to the caller's request (in logs and the tools' context)")
	fl.StringVar(&f.traceID, "trace-id", "", "the run's trace id (32 hex digits): on every event, in the Result and the logs, sent to models and http_request")
	fl.Int64Var(&f.seed, "seed", 0, "make the run's ids and randomness derive from this seed (with --now: a deterministic run)")
	fl.StringVar(&f.now, "now", "", "the run's clock, RFC 3339: every time it reports is this one and every duration 0 (with --seed: a deterministic run)")
	fl.StringVar(&f.traceParent, "traceparent", "", "the caller's W3C trace context (00-TRACEID-SPANID-FLAGS), instead of --trace-id")
	fl.StringVar(&f.traceState, "tracestate", "", "the caller's W3C tracestate (vendor=value,…), passed on beside --traceparent or --trace-id")
	dbFlag(cmd, &f.db)
	fl.BoolVar(&f.noStore, "no-store", false, "do not store the run (it cannot be traced, replayed or resumed)")
	t.flags(cmd, false)
	fl.BoolVar(&detach, "detach", false, "with --temporal: print the run's id and return at once; the run goes on on the workers")
	return cmd
}

// outputFlags are the flags of every command that runs an agent (run,
// resume): output, events, progress, pricing, the network guard, logs.
func outputFlags(cmd *cobra.Command, f *runFlags) {
	fl := cmd.Flags()
	fl.BoolVar(&f.json, "json", false, "print the whole result as JSON on stdout")
	fl.StringVar(&f.events, "events", "", "write every event as a JSON line to this file")
	fl.BoolVarP(&f.quiet, "quiet", "q", false, "no progress on stderr")
	agentFlags(cmd, f)
}

// agentFlags are the flags of every command that builds agents: pricing,
// the network guard, logs, the prompt store.
func agentFlags(cmd *cobra.Command, f *runFlags) {
	fl := cmd.Flags()
	fl.StringVar(&f.pricing, "pricing", os.Getenv("AGENTRY_PRICING"), "pricing file to add to the built-in table (env AGENTRY_PRICING)")
	fl.BoolVar(&f.allowPrivate, "allow-private-network", false, "let http_get and http_request reach loopback and private addresses")
	fl.StringVar(&f.logLevel, "log-level", os.Getenv("AGENTRY_LOG_LEVEL"), "log records on stderr at this level: debug, info, warn, error, off (env AGENTRY_LOG_LEVEL; off by default)")
	fl.StringVar(&f.logFormat, "log-format", os.Getenv("AGENTRY_LOG_FORMAT"), "log records as json or text (env AGENTRY_LOG_FORMAT; implies --log-level info)")
	promptsFlag(cmd, &f.prompts)
}

func runAgent(ctx context.Context, target string, f runFlags, stdout, stderr io.Writer) error {
	su, err := prepare(ctx, f, stderr)
	if err != nil {
		return usageErr(err)
	}
	defer su.close()
	runOpts := su.sessionOpts
	for _, l := range su.listeners {
		runOpts = append(runOpts, agent.WithEvents(l.fn, l.opts...))
	}
	if su.store != nil {
		runOpts = append(runOpts, agent.WithStore(su.store))
	}
	a, err := loadAgent(target, f, su.agentOpts)
	if err != nil {
		return usageErr(err)
	}
	defer a.Close()
	sess, err := a.NewSession(su.input, runOpts...)
	if ie := (*agent.InputError)(nil); errors.As(err, &ie) && f.json {
		// Bad input is a run's Result too, printed like any other.
		res, runErr := a.Run(ctx, su.input, runOpts...)
		return su.finish(f, stdout, res, func() {}, runErr)
	}
	if err != nil {
		return usageErr(err)
	}
	ctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	defer stop()
	res, runErr := sess.Run(ctx)
	return su.finish(f, stdout, res, func() {
		if res.Success {
			printAnswer(stdout, res.Result)
		}
		printPause(stdout, res, dbArg(f.db))
	}, runErr)
}

// setup is what every run of the command needs: the input, the run store
// (nil with --no-store), the options of its agents (with the store's
// memory and prompts) and of their sessions, the recorder of --record,
// and the event listeners.
type setup struct {
	input       map[string]any
	store       store.Store
	agentOpts   []agent.Option
	sessionOpts []agent.RunOption
	rec         *scripted.Recorder
	logger      *slog.Logger // nil without --log-level
	telemetry   *telemetry
	listeners   []listener
	close       func()
}

// listener is an event subscriber of the command and its policy: the
// progress is a live view, the --events file a sink that loses nothing.
type listener struct {
	fn   func(event.Event)
	opts []event.Option
}

// runOptions are the run options the flags give: the user, the trace,
// the seed and the clock, the correlation id.
func (f runFlags) runOptions() ([]agent.RunOption, error) {
	var opts []agent.RunOption
	if f.user != "" {
		opts = append(opts, agent.WithUser(f.user))
	}
	if f.traceState != "" && f.traceID == "" && f.traceParent == "" {
		return nil, errors.New("--tracestate: give --traceparent or --trace-id too (a tracestate is read only beside one)")
	}
	if f.traceID != "" && f.traceParent != "" {
		return nil, errors.New("--trace-id and --traceparent: give one (a traceparent carries its trace id)")
	}
	if f.traceID != "" {
		if len(f.traceID) != 32 || strings.Contains(f.traceID, "-") {
			return nil, fmt.Errorf("--trace-id %q: want 32 hex digits (a W3C traceparent goes in --traceparent)", f.traceID)
		}
		opts = append(opts, agent.WithTraceContext(f.traceID, f.traceState))
	}
	if f.seedSet {
		opts = append(opts, agent.WithSeed(f.seed))
	}
	if f.now != "" {
		t, err := time.Parse(time.RFC3339Nano, f.now)
		if err != nil {
			return nil, fmt.Errorf("--now %q: want an RFC 3339 time (2026-01-02T15:04:05Z)", f.now)
		}
		opts = append(opts, agent.WithNow(t))
	}
	if f.traceParent != "" {
		opts = append(opts, agent.WithTraceContext(f.traceParent, f.traceState))
	}
	if f.correlation != "" {
		opts = append(opts, agent.WithCorrelationID(f.correlation))
	}
	return opts, nil
}

// prepare reads the input and opens what a run of the flags needs: the
// agent's options, the run's, the store, the listeners, telemetry.
func prepare(ctx context.Context, f runFlags, stderr io.Writer) (*setup, error) {
	input, err := readInput(f)
	if err != nil {
		return nil, err
	}
	opts, rec, err := agentOptions(f)
	if err != nil {
		return nil, err
	}
	logger, err := newLogger(f.logLevel, f.logFormat, stderr)
	if err != nil {
		return nil, err
	}
	if logger != nil {
		opts = append(opts, agent.WithLogger(logger))
	}
	sessionOpts, err := f.runOptions()
	if err != nil {
		return nil, err
	}
	var st store.Store
	if !f.noStore {
		if st, err = openStore(ctx, f.db); err != nil {
			return nil, err
		}
	}
	so, err := storeOptions(st, f.prompts)
	if err != nil {
		if st != nil {
			st.Close()
		}
		return nil, usageErr(err)
	}
	opts = append(opts, so...)
	listeners, closeFn, err := eventListeners(f, stderr)
	if err == nil {
		var tel *telemetry
		if tel, err = openTelemetry(ctx); err == nil {
			opts = append(opts, tel.agentOptions()...)
			su := &setup{input: input, store: st, agentOpts: opts, sessionOpts: sessionOpts, rec: rec, logger: logger, telemetry: tel, listeners: listeners}
			su.close = func() {
				closeFn()
				if err := tel.shutdown(); err != nil {
					fmt.Fprintf(stderr, "agentry: OpenTelemetry export: %v\n", err)
				}
				if st != nil {
					st.Close()
				}
			}
			return su, nil
		}
		closeFn()
		err = usageErr(err)
	}
	if st != nil {
		st.Close()
	}
	return nil, err
}

// finish writes the recording, then the result (as JSON with --json, by
// text otherwise), and turns the run's error into the exit code.
func (su *setup) finish(f runFlags, stdout io.Writer, result any, text func(), runErr error) error {
	return finishRun(f.json, f.record, su.rec, stdout, result, text, runErr)
}

// finishRun writes the recording, then the result (as JSON with --json,
// by text otherwise), and turns the run's error into the exit code.
func finishRun(asJSON bool, record string, rec *scripted.Recorder, stdout io.Writer, result any, text func(), runErr error) error {
	if rec != nil {
		if err := rec.WriteFile(record); err != nil {
			return runFailed(fmt.Errorf("--record: %w", err))
		}
	}
	if asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		if err := enc.Encode(result); err != nil {
			return runFailed(err)
		}
	} else {
		text()
	}
	switch {
	case runErr == nil:
		return nil
	case agent.IsConfigError(runErr):
		return usageErr(runErr)
	case errors.Is(runErr, agent.ErrAwaitingApproval):
		return &exitError{code: exitPaused, err: waitsFor(result)}
	}
	return runFailed(runErr)
}

// waitsFor names the calls a paused run waits on, for stderr: what to
// type next is on stdout (or in the Result's waiting, with --json).
func waitsFor(result any) error {
	var res agent.Result
	switch r := result.(type) {
	case *agent.Result:
		if r != nil {
			res = *r
		}
	case json.RawMessage: // a run on Temporal
		json.Unmarshal(r, &res)
	}
	calls := make([]string, len(res.Waiting))
	for i, c := range res.Waiting {
		calls[i] = fmt.Sprintf("%s (%s, key %s)", c.CallID, c.Tool, c.Key)
	}
	return fmt.Errorf("run %s waits for approval: %s", res.ID, strings.Join(calls, ", "))
}

// exitPaused is the exit code of a run that waits for a person: a call
// awaiting approval, or a pipeline's question.
const exitPaused = 3

// printPause says what a run that waits for approval waits on, and the
// commands that approve or deny each call; flag is what those commands
// need to find the run (its --db, or --temporal).
func printPause(w io.Writer, res *agent.Result, flag string) {
	if res == nil || len(res.Waiting) == 0 {
		return
	}
	calls := "1 call"
	if len(res.Waiting) != 1 {
		calls = fmt.Sprintf("%d calls", len(res.Waiting))
	}
	fmt.Fprintf(w, "The run waits for approval of %s:\n", calls)
	for _, c := range res.Waiting {
		fmt.Fprintf(w, "  %s %s\n    %s\n", c.Tool, oneLine(string(c.Arguments), 200), c.Reason)
	}
	if flag != "" {
		flag = " " + flag
	}
	fmt.Fprintln(w, "Approve or deny each call by its key:")
	for _, c := range res.Waiting {
		fmt.Fprintf(w, "  agentry resume %s%s --approve %s\n", res.ID, flag, c.Key)
		fmt.Fprintf(w, "  agentry resume %s%s --deny %s --reason \"…\"\n", res.ID, flag, c.Key)
	}
}

// dbArg is the --db flag a later command needs to find a run stored in
// db, "" for the default store.
func dbArg(db string) string {
	if db == "" {
		return ""
	}
	return "--db " + shellQuote(db)
}

// shellQuote quotes s for a POSIX shell when it needs it.
func shellQuote(s string) string {
	if s != "" && strings.Trim(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_./:@=+,") == "" {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// agentOptions are the options every agent of a run gets: the built-in
// tools, the agents directory, --model, --pricing and --record.
func agentOptions(f runFlags) ([]agent.Option, *scripted.Recorder, error) {
	opts := []agent.Option{agent.WithTools(builtinTools(f.allowPrivate)), agent.WithAgents(spec.Dir{Path: f.agents})}
	if f.model != "" {
		opts = append(opts, agent.WithModel(modelName(f.model)))
	}
	if f.pricing != "" {
		p, err := llm.LoadPricingFile(f.pricing)
		if err != nil {
			return nil, nil, err
		}
		opts = append(opts, agent.WithPricing(p))
	}
	var rec *scripted.Recorder
	if f.record != "" {
		rec = scripted.NewRecorder()
		opts = append(opts, agent.WithTransportMiddleware(rec.Wrap))
	}
	return opts, rec, nil
}

// eventListeners are the progress printer (unless --quiet) and the --events
// file writer.
func eventListeners(f runFlags, stderr io.Writer) ([]listener, func(), error) {
	var out []listener
	if !f.quiet {
		out = append(out, listener{fn: newProgress(stderr).handle})
	}
	closeFn := func() {}
	if f.events != "" {
		// Events hold prompts and tool results: the owner's only.
		file, err := os.OpenFile(f.events, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
		if err == nil {
			if err = file.Chmod(0o600); err != nil { // a file that was there keeps its mode otherwise
				file.Close()
			}
		}
		if err != nil {
			return nil, nil, fmt.Errorf("--events: %w", err)
		}
		write, _ := event.JSONLines(file)
		out = append(out, listener{fn: write, opts: []event.Option{event.Block()}})
		closeFn = func() { file.Close() }
	}
	return out, closeFn, nil
}

// modelName makes the path of a scripted model absolute: a stored run
// records its model, and a resume from another directory must find it.
func modelName(model string) string {
	if path, ok := strings.CutPrefix(model, "scripted:"); ok && !filepath.IsAbs(path) {
		if abs, err := filepath.Abs(path); err == nil {
			return "scripted:" + abs
		}
	}
	return model
}

// loadAgent treats target as a spec file when it names one, and as an
// agent reference in --agents otherwise.
func loadAgent(target string, f runFlags, opts []agent.Option) (*agent.Agent, error) {
	if f.unlisted && f.model == "" {
		return nil, usageErr(errors.New("--model-unlisted: give --model (a spec's own model is unlisted by its \"model_unlisted\": true)"))
	}
	if st, err := os.Stat(target); err == nil && !st.IsDir() {
		if s, err := spec.Load(target); err == nil && f.unlisted {
			s.ModelUnlisted = true
			return agent.New(s, append([]agent.Option{agent.WithBaseDir(filepath.Dir(target))}, opts...)...)
		}
		return agent.FromFile(target, opts...)
	}
	if strings.HasSuffix(target, ".json") || strings.ContainsRune(target, filepath.Separator) {
		return nil, fmt.Errorf("spec file %s does not exist", target)
	}
	d := spec.Dir{Path: f.agents}
	if s, path, err := d.Load(target); err == nil && d.CheckLock(s) == nil && f.unlisted {
		s.ModelUnlisted = true
		return agent.New(s, append([]agent.Option{agent.WithAgents(d), agent.WithBaseDir(filepath.Dir(path))}, opts...)...)
	}
	return agent.FromDir(f.agents, target, opts...)
}

func readInput(f runFlags) (map[string]any, error) {
	input := map[string]any{}
	if f.inputFile != "" {
		data, err := os.ReadFile(f.inputFile)
		if err != nil {
			return nil, fmt.Errorf("--input-file: %w", err)
		}
		if err := json.Unmarshal(data, &input); err != nil {
			return nil, fmt.Errorf("--input-file %s: want a JSON object: %w", f.inputFile, err)
		}
		if input == nil {
			return nil, fmt.Errorf("--input-file %s: want a JSON object, got null", f.inputFile)
		}
	}
	for _, kv := range f.inputs {
		k, v, ok := strings.Cut(kv, "=")
		if !ok || k == "" {
			return nil, fmt.Errorf("--input %q: want key=value", kv)
		}
		input[k] = v
	}
	return input, nil
}

func printAnswer(w io.Writer, v any) {
	switch x := v.(type) {
	case string:
		fmt.Fprintln(w, x)
	case nil:
	default:
		b, err := json.MarshalIndent(x, "", "  ")
		if err != nil {
			fmt.Fprintln(w, x)
			return
		}
		fmt.Fprintln(w, string(b))
	}
}

// modelRoles reads --model-role ROLE=MODEL flags.
func modelRoles(flags []string) (map[string]string, error) {
	if len(flags) == 0 {
		return nil, nil
	}
	roles := map[string]string{}
	for _, kv := range flags {
		role, model, ok := strings.Cut(kv, "=")
		if !ok || role == "" || model == "" {
			return nil, fmt.Errorf("--model-role %q: want ROLE=PROVIDER:MODEL", kv)
		}
		roles[role] = modelName(model)
	}
	return roles, nil
}
