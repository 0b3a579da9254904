package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/agentry/agentry/agent"
	"github.com/agentry/agentry/llm"
	"github.com/agentry/agentry/pipeline"
	"github.com/agentry/agentry/runlog"
	"github.com/agentry/agentry/store"
)

type resumeFlags struct {
	runFlags
	approve []string
	deny    []string
	reason  string
	answer  string
	// temporal reaches the runs Temporal drives: they are decided there.
	temporal temporalFlags
}

func newResumeCmd(stdout, stderr io.Writer) *cobra.Command {
	var f resumeFlags
	cmd := &cobra.Command{
		Use:   "resume RUN_ID",
		Short: "Continue an interrupted run, or a run awaiting approval",
		Long: `Continue a stored run from its last durable point: an interrupted run (its process
died), a run awaiting approval (--approve or --deny each call it names: a call of
unknown outcome, or one the policy's approval rule holds back; --reason says why
they are denied), or a paused pipeline (--answer). A call is named by its
idempotency key (RUN_ID:TURN:INDEX), or by the model's call id when that names
exactly one waiting call. Recorded model turns are not asked again and recorded
tool results are not run again. Without --model the run's own model goes on (a
scripted model plays on from the turn after the last recorded call); --model
gives the rest of the run another model (a scripted file from its first turn).
Exit codes as for run.`,
		Args: exactlyOne("resume takes one run id"),
		RunE: func(cmd *cobra.Command, args []string) error {
			return resume(cmd.Context(), args[0], f, stdout, stderr)
		},
	}
	fl := cmd.Flags()
	dbFlag(cmd, &f.db)
	fl.StringVar(&f.model, "model", "", "the model for the rest of the run (PROVIDER:MODEL)")
	fl.StringArrayVar(&f.approve, "approve", nil, "let a waiting call go on: one held for approval runs, one of unknown outcome is sent again with its key (KEY or CALL_ID; repeatable)")
	fl.StringArrayVar(&f.deny, "deny", nil, "answer a waiting call without running it; the model is told so (KEY or CALL_ID; repeatable)")
	fl.StringVar(&f.reason, "reason", "", "why the calls --deny names are denied (the model is told, the audit log keeps it)")
	fl.StringVar(&f.answer, "answer", "", "the answer a paused pipeline waits for")
	outputFlags(cmd, &f.runFlags)
	f.temporal.flags(cmd, false)
	return cmd
}

func resume(ctx context.Context, runID string, f resumeFlags, stdout, stderr io.Writer) error {
	if f.reason != "" && len(f.deny) == 0 {
		return usageErr(fmt.Errorf("--reason says why calls are denied: name them with --deny"))
	}
	st, err := openStore(ctx, f.db)
	if err != nil {
		return usageErr(err)
	}
	defer st.Close()
	run, err := st.Get(ctx, runID)
	if err != nil {
		return storeErr(err)
	}
	if run.Kind == "pipeline" {
		return resumePipeline(ctx, st, run, f, stdout, stderr)
	}
	if f.answer != "" {
		return usageErr(fmt.Errorf("--answer continues a paused pipeline; run %s is an agent's", runID))
	}
	lopts, err := logOptions()
	if err != nil {
		return usageErr(err)
	}
	if driver := runlog.Driver(ctx, st, runID, lopts...); strings.HasPrefix(driver, "temporal:") {
		return decideOnTemporal(ctx, st, runID, driver, f, stdout, stderr)
	}
	opts, err := storedAgentOptions(f.runFlags, stderr)
	if err != nil {
		return usageErr(err)
	}
	so, err := storeOptions(st, f.prompts)
	if err != nil {
		return usageErr(err)
	}
	a, err := agent.Stored(ctx, st, runID, append(opts, so...)...)
	if err != nil {
		return usageErr(err)
	}
	defer a.Close()
	listeners, closeFn, err := eventListeners(f.runFlags, stderr)
	if err != nil {
		return usageErr(err)
	}
	defer closeFn()
	var sessOpts []agent.RunOption
	for _, l := range listeners {
		sessOpts = append(sessOpts, agent.WithEvents(l.fn, l.opts...))
	}
	if len(f.approve) > 0 {
		sessOpts = append(sessOpts, agent.Approve(f.approve...))
	}
	if len(f.deny) > 0 {
		sessOpts = append(sessOpts, agent.Deny(f.deny...))
	}
	if f.reason != "" {
		sessOpts = append(sessOpts, agent.WithDenyReason(f.reason))
	}
	sess, err := a.Resume(ctx, st, runID, sessOpts...)
	if err != nil {
		if errors.Is(err, agent.ErrNotResumable) {
			return runFailed(err)
		}
		return usageErr(err)
	}
	if !f.quiet {
		fmt.Fprintf(stderr, "↻ resuming run %s (%s)\n", runID, run.Status)
	}
	ctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	defer stop()
	res, runErr := sess.Run(ctx)
	return finishRun(f.json, "", nil, stdout, res, func() {
		if res.Success {
			printAnswer(stdout, res.Result)
		}
		printPause(stdout, res, dbArg(f.db))
	}, runErr)
}

// storedAgentOptions are the options a stored run's agent is built with
// again: the built-in tools, --pricing, --model and the logger; its
// spec, directories and own model come from the run's log.
func storedAgentOptions(f runFlags, stderr io.Writer) ([]agent.Option, error) {
	opts := []agent.Option{agent.WithTools(builtinTools(f.allowPrivate))}
	if f.model != "" {
		opts = append(opts, agent.WithModel(modelName(f.model)))
	}
	if f.pricing != "" {
		p, err := llm.LoadPricingFile(f.pricing)
		if err != nil {
			return nil, err
		}
		opts = append(opts, agent.WithPricing(p))
	}
	logger, err := newLogger(f.logLevel, f.logFormat, stderr)
	if err != nil {
		return nil, err
	}
	if logger != nil {
		opts = append(opts, agent.WithLogger(logger))
	}
	return opts, nil
}

// resumePipeline continues a pipeline paused for the user with --answer.
func resumePipeline(ctx context.Context, st store.Store, run store.Run, f resumeFlags, stdout, stderr io.Writer) error {
	if run.Status != store.AwaitingApproval {
		return runFailed(fmt.Errorf("%w: pipeline run %s is %s; a pipeline resumes when it waits for an answer "+
			"(its interrupted stage runs resume on their own: agentry runs --json lists them with parent_id %s)",
			agent.ErrNotResumable, run.ID, run.Status, run.ID))
	}
	decided := len(f.approve)+len(f.deny) > 0
	if f.answer == "" && !decided {
		return usageErr(fmt.Errorf("pipeline run %s waits for an answer: give it with --answer (or, at a confirm, --approve or --deny the stage)", run.ID))
	}
	if f.answer != "" && decided {
		return usageErr(fmt.Errorf("give --answer, or --approve/--deny, not both"))
	}
	opts, err := storedAgentOptions(f.runFlags, stderr)
	if err != nil {
		return usageErr(err)
	}
	popts := []pipeline.Option{pipeline.WithTools(builtinTools(f.allowPrivate)), pipeline.WithAgentOptions(opts[1:]...)}
	key, err := encryptionKey()
	if err != nil {
		return usageErr(err)
	}
	if key != nil {
		popts = append(popts, pipeline.WithEncryptionKey(key))
	}
	p, env, err := pipeline.Stored(ctx, st, run.ID, popts...)
	if err != nil {
		return usageErr(err)
	}
	if env == nil || env.Pending == nil {
		return runFailed(fmt.Errorf("%w: pipeline run %s has no question waiting", agent.ErrNotResumable, run.ID))
	}
	var answer any = f.answer
	if decided {
		// A confirm is decided like a call: approve or deny its stage.
		stage := env.Pending.Stage
		ids := append(append([]string(nil), f.approve...), f.deny...)
		if env.Pending.Outcome != "confirm" || len(ids) != 1 || ids[0] != stage {
			return usageErr(fmt.Errorf("pipeline run %s waits at stage %s (%s): --approve or --deny %s at a confirm, --answer otherwise",
				run.ID, stage, env.Pending.Outcome, stage))
		}
		answer = pipeline.Confirmation{Approved: len(f.approve) == 1, Reason: f.reason}
	}
	listeners, closeFn, err := eventListeners(f.runFlags, stderr)
	if err != nil {
		return usageErr(err)
	}
	defer closeFn()
	runOpts := []pipeline.RunOption{pipeline.WithStore(st), pipeline.WithRunID(run.ID)}
	for _, l := range listeners {
		runOpts = append(runOpts, pipeline.WithEvents(l.fn, l.opts...))
	}
	ctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	defer stop()
	res, runErr := p.Resume(ctx, env, answer, runOpts...)
	if res == nil {
		return runFailed(runErr)
	}
	return pausedPipeline(finishRun(f.json, "", nil, stdout, res, func() { printPipelineAnswer(stdout, res) }, runErr), res)
}
