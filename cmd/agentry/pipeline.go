package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/agentry/agentry/pipeline"
)

// runPipeline runs (or, with --resume, continues) the pipeline at path.
// Exit codes: 0 when it reached its end or terminated; 3 when it waits
// for the user; 1 when a stage failed; 2 for a malformed definition or
// input.
func runPipeline(ctx context.Context, path string, f runFlags, stdout, stderr io.Writer) error {
	su, err := prepare(ctx, f, stderr)
	if err != nil {
		return usageErr(err)
	}
	defer su.close()
	runOpts := []pipeline.RunOption{pipeline.WithSessionOptions(su.sessionOpts...)}
	for _, l := range su.listeners {
		runOpts = append(runOpts, pipeline.WithEvents(l.fn, l.opts...))
	}
	if su.store != nil {
		runOpts = append(runOpts, pipeline.WithStore(su.store))
	}
	opts := []pipeline.Option{pipeline.WithTools(builtinTools(f.allowPrivate)), pipeline.WithAgentOptions(su.agentOpts...)}
	opts = append(opts, su.telemetry.pipelineOptions()...)
	if su.logger != nil {
		opts = append(opts, pipeline.WithLogger(su.logger))
	}
	key, err := encryptionKey()
	if err != nil {
		return usageErr(err)
	}
	if key != nil {
		opts = append(opts, pipeline.WithEncryptionKey(key))
	}
	if f.agentsSet {
		opts = append(opts, pipeline.WithAgentsDir(f.agents))
	}
	roles, err := modelRoles(f.roles)
	if err != nil {
		return usageErr(err)
	}
	if roles != nil {
		opts = append(opts, pipeline.WithModelRoles(roles))
	}
	p, err := pipeline.FromFile(path, opts...)
	if err != nil {
		return usageErr(err)
	}
	defer p.Close()
	ctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	defer stop()
	var res *pipeline.Result
	var runErr error
	if f.resume != "" {
		env, err := readEnvelope(f.resume)
		if err != nil {
			return usageErr(err)
		}
		var answer any = su.input
		if v, ok := su.input["answer"]; ok && len(su.input) == 1 {
			answer = v
		}
		res, runErr = p.Resume(ctx, env, answer, runOpts...)
		if res == nil {
			return usageErr(runErr)
		}
	} else {
		res, runErr = p.Run(ctx, su.input, runOpts...)
	}
	return pausedPipeline(su.finish(f, stdout, res, func() { printPipelineAnswer(stdout, res) }, runErr), res)
}

// pausedPipeline is err, or the exit code of a pipeline run that waits
// for the user, whose question and how to answer it are printed.
func pausedPipeline(err error, res *pipeline.Result) error {
	if err != nil || res == nil || res.Envelope == nil || res.Envelope.Pending == nil {
		return err
	}
	return &exitError{code: exitPaused}
}

func printPipelineAnswer(w io.Writer, res *pipeline.Result) {
	if pd := res.Envelope.Pending; pd != nil {
		fmt.Fprintf(w, "The pipeline waits at stage %s (%s): %s\n", pd.Stage, pd.Outcome, pd.Question)
		fmt.Fprintf(w, "Answer with: agentry resume %s --answer TEXT\n", res.ID)
	} else {
		printAnswer(w, res.Result.Result)
	}
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
