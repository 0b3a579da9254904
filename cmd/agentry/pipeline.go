package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/agentry/agentry/agent"
	"github.com/agentry/agentry/pipeline"
)

// runPipeline runs (or, with --resume, continues) the pipeline at path.
// Exit codes: 0 when it reached its end, terminated or paused for the
// user; 1 when a stage failed; 2 for a malformed definition or input.
func runPipeline(ctx context.Context, path string, f runFlags, stdout, stderr io.Writer) error {
	input, err := readInput(f)
	if err != nil {
		return usageErr(err)
	}
	aopts, rec, err := agentOptions(f)
	if err != nil {
		return usageErr(err)
	}
	opts := []pipeline.Option{pipeline.WithTools(builtinTools(f.allowPrivate)), pipeline.WithAgentOptions(aopts...)}
	if f.agentsSet {
		opts = append(opts, pipeline.WithAgentsDir(f.agents))
	}
	p, err := pipeline.FromFile(path, opts...)
	if err != nil {
		return usageErr(err)
	}
	listeners, closeEvents, err := eventListeners(f, stderr)
	if err != nil {
		return usageErr(err)
	}
	defer closeEvents()
	var runOpts []pipeline.RunOption
	for _, l := range listeners {
		runOpts = append(runOpts, pipeline.WithEvents(l))
	}
	ctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	defer stop()
	var res *pipeline.Result
	var runErr error
	if f.resume != "" {
		env, err := readEnvelope(f.resume)
		if err != nil {
			return usageErr(err)
		}
		var answer any = input
		if v, ok := input["answer"]; ok && len(input) == 1 {
			answer = v
		}
		res, runErr = p.Resume(ctx, env, answer, runOpts...)
		if res == nil {
			return usageErr(runErr)
		}
	} else {
		res, runErr = p.Run(ctx, input, runOpts...)
	}
	if rec != nil {
		if err := rec.WriteFile(f.record); err != nil {
			return runFailed(fmt.Errorf("--record: %w", err))
		}
	}
	switch {
	case f.json:
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		if err := enc.Encode(res); err != nil {
			return runFailed(err)
		}
	case res.Envelope.Pending != nil:
		pd := res.Envelope.Pending
		fmt.Fprintf(stdout, "The pipeline waits at stage %s (%s): %s\n", pd.Stage, pd.Outcome, pd.Question)
	default:
		printAnswer(stdout, res.Result.Result)
	}
	if runErr != nil {
		if agent.IsConfigError(runErr) {
			return usageErr(runErr)
		}
		return runFailed(runErr)
	}
	return nil
}

// readEnvelope reads a paused pipeline: a --json result (with its
// "envelope") or a bare envelope.
func readEnvelope(path string) (*pipeline.Envelope, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("--resume: %w", err)
	}
	var wrapper struct {
		Envelope *pipeline.Envelope `json:"envelope"`
	}
	if err := json.Unmarshal(data, &wrapper); err != nil {
		return nil, fmt.Errorf("--resume %s: %w", path, err)
	}
	if wrapper.Envelope != nil {
		return wrapper.Envelope, nil
	}
	var env pipeline.Envelope
	if err := json.Unmarshal(data, &env); err != nil || env.Format != pipeline.EnvelopeFormat {
		return nil, fmt.Errorf("--resume %s: not a pipeline result or envelope", path)
	}
	return &env, nil
}
