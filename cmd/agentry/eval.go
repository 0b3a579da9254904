package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"strings"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/agentry/agentry/agent"
	"github.com/agentry/agentry/eval"
	"github.com/agentry/agentry/llm"
	"github.com/agentry/agentry/spec"
)

// evalFlags are the flags of agentry eval.
type evalFlags struct {
	agents, db, prompts, junit, baseline string
	targets, models                      []string
	trials, concurrency, maxRegression   int
	failUnder                            float64
	asJSON, quiet, allowPrivate          bool
}

func newEvalCmd(stdout, stderr io.Writer) *cobra.Command {
	var f evalFlags
	cmd := &cobra.Command{
		Use:   "eval DATASET",
		Short: "Evaluate agents on a dataset of cases, and compare them",
		Long: `Run every case of DATASET (JSON, or JSON Lines) on each --agent (and each --model), each
case as an ordinary stored run of the evaluation, check its assertions, and report per agent
the pass rate, steps per task, tool error rate and latencies, tokens, cost and time, with the
cases that changed between two agents (docs/evals.md). The evaluation is stored in the run
store: "eval list", "eval show" and "eval rescore" read it.

Exit codes: 0 every gate passed, 1 a gate failed (--fail-under, --max-regression) or the
evaluation could not finish, 2 a bad dataset or bad usage (the message names the case and
the field).`,
		Example: `  agentry eval examples/evals/triage.json --agents examples/evals/agents --agent triage@v1 --agent triage@v2
  agentry eval cases.jsonl --agent support --model openai:gpt-4.1-mini --trials 3 --fail-under 0.9 --junit eval.xml
  agentry eval cases.json --agent support@v3 --baseline eval_4f1c... --max-regression 0`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return runEval(cmd.Context(), args[0], f, stdout, stderr)
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&f.agents, "agents", "agents", "the agents directory, for --agent names and judge agents")
	fl.StringArrayVar(&f.targets, "agent", nil, "an agent to evaluate, NAME[@VERSION] or a spec file (repeatable: agents side by side)")
	fl.StringArrayVar(&f.models, "model", nil, "run the agents on this model instead of the spec's, PROVIDER:MODEL (repeatable: models side by side)")
	fl.IntVar(&f.trials, "trials", 1, "run each case this many times (pass rate and pass@k)")
	fl.IntVar(&f.concurrency, "concurrency", 1, "how many runs go at once")
	fl.BoolVar(&f.asJSON, "json", false, "print the report as JSON")
	fl.StringVar(&f.junit, "junit", "", "write the report as JUnit XML to this file, for CI systems")
	fl.Float64Var(&f.failUnder, "fail-under", 0, "exit 1 when an agent's pass rate is under this (0..1)")
	fl.StringVar(&f.baseline, "baseline", "", "an earlier evaluation's id to compare the first agent with")
	fl.IntVar(&f.maxRegression, "max-regression", -1, "with --baseline: exit 1 when more case trials than this passed in the baseline and fail now")
	fl.BoolVarP(&f.quiet, "quiet", "q", false, "no progress on stderr")
	fl.BoolVar(&f.allowPrivate, "allow-private-network", false, "let the HTTP tools reach private and loopback addresses")
	dbFlag(cmd, &f.db)
	promptsFlag(cmd, &f.prompts)
	cmd.AddCommand(newEvalListCmd(stdout), newEvalShowCmd(stdout), newEvalRescoreCmd(stdout))
	return cmd
}

func runEval(ctx context.Context, path string, f evalFlags, stdout, stderr io.Writer) error {
	ds, err := eval.Load(path)
	if err != nil {
		return usageErr(err)
	}
	if err := f.check(); err != nil {
		return usageErr(err)
	}
	st, lo, err := openReading(ctx, f.db)
	if err != nil {
		return err
	}
	defer st.Close()
	var baseline *eval.Report
	if f.baseline != "" {
		if baseline, err = eval.Stored(ctx, st, f.baseline, lo...); err != nil {
			return usageErr(fmt.Errorf("--baseline: %w", err))
		}
	}
	so, err := storeOptions(st, f.prompts)
	if err != nil {
		return usageErr(err)
	}
	opts := evalAgentOptions(f, so)
	targets, closeAll, err := evalTargets(f, opts)
	defer closeAll()
	if err != nil {
		return usageErr(err)
	}
	judge, closeJudges := judgeWith(f.agents, opts, st)
	defer closeJudges()
	if err := precheck(ds, targets, f.agents, opts); err != nil {
		return usageErr(err)
	}
	// Ctrl-C ends the evaluation: no run begins after it, the runs going
	// are aborted, and the report of what ran is stored, aborted.
	ctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	defer stop()
	o := eval.Options{Store: st, Trials: f.trials, Concurrency: f.concurrency, Judge: judge, Baseline: baseline}
	if !f.quiet {
		o.Progress = progressBar(stderr)
	}
	rep, err := eval.Run(ctx, ds, targets, o)
	if o.Progress != nil {
		fmt.Fprintln(stderr)
	}
	if err != nil && rep == nil {
		return runFailed(err)
	}
	if werr := writeReport(stdout, rep, f.asJSON, f.junit); werr != nil {
		return runFailed(werr)
	}
	if errors.Is(err, context.Canceled) {
		return runFailed(fmt.Errorf("interrupted: what ran is stored as evaluation %s (aborted)", rep.ID))
	} else if err != nil {
		return runFailed(err)
	}
	return f.gates(rep)
}

func (f evalFlags) check() error {
	switch {
	case len(f.targets) == 0:
		return errors.New("--agent is required: the agent to evaluate, NAME[@VERSION] or a spec file")
	case f.trials < 1:
		return fmt.Errorf("--trials %d: want 1 or more", f.trials)
	case f.concurrency < 1:
		return fmt.Errorf("--concurrency %d: want 1 or more", f.concurrency)
	case f.failUnder < 0 || f.failUnder > 1:
		return fmt.Errorf("--fail-under %v: want a pass rate, 0..1", f.failUnder)
	case f.maxRegression >= 0 && f.baseline == "":
		return errors.New("--max-regression needs --baseline, the evaluation to compare with")
	}
	return nil
}

// gates turns the report into the exit code: 1 when a pass rate is under
// --fail-under, or more case trials regressed than --max-regression.
func (f evalFlags) gates(rep *eval.Report) error {
	var failed []string
	for _, a := range rep.Agents {
		if a.PassRate < f.failUnder {
			failed = append(failed, fmt.Sprintf("%s passed %.1f%%, under --fail-under %.1f%%", a.Agent, 100*a.PassRate, 100*f.failUnder))
		}
	}
	if c := rep.Baseline; f.maxRegression >= 0 && c != nil && len(c.Regressions) > f.maxRegression {
		failed = append(failed, fmt.Sprintf("%d case trials passed in %s and fail now (%s), over --max-regression %d",
			len(c.Regressions), c.Baseline, strings.Join(c.Regressions, ", "), f.maxRegression))
	}
	if len(failed) > 0 {
		return runFailed(errors.New(strings.Join(failed, "; ")))
	}
	return nil
}

// precheck refuses, before anything runs, a case input an agent does not
// take and a judge the agents directory does not have: each names the
// case and the field.
func precheck(ds *eval.Dataset, targets []eval.Target, agentsDir string, opts []agent.Option) error {
	var probs []string
	for i, c := range ds.Cases {
		at := fmt.Sprintf("cases[%d] %q", i, c.Name)
		for _, t := range targets {
			if len(c.Conversation) == 0 {
				if _, err := t.Agent.NewSession(c.Input); err != nil {
					probs = append(probs, fmt.Sprintf("%s: input: %s: %v", at, t.Label, err))
				}
				continue
			}
			for j, turn := range c.Conversation {
				input, err := turn.Input, error(nil)
				if input == nil {
					input, err = t.Agent.MessageInput(turn.Message)
				}
				if err == nil {
					_, err = t.Agent.NewSession(input)
				}
				if err != nil {
					probs = append(probs, fmt.Sprintf("%s: conversation[%d]: %s: %v", at, j, t.Label, err))
				}
			}
		}
	}
	if err := checkJudges(ds, agentsDir, opts, nil); err != nil {
		probs = append(probs, err.Error())
	}
	if len(probs) > 0 {
		return errors.New(strings.Join(probs, "; "))
	}
	return nil
}

// checkJudges refuses a judge the agents directory does not have,
// naming the case and the assertion; known says which judges have their
// verdicts already (a rescore's), and need not be there.
func checkJudges(ds *eval.Dataset, agentsDir string, opts []agent.Option, known map[[2]string]bool) error {
	var probs []string
	judges := map[string]error{}
	for i, c := range ds.Cases {
		at := fmt.Sprintf("cases[%d] %q", i, c.Name)
		for j, a := range ds.Assertions(&ds.Cases[i]) {
			if a.Type != "judge" || known[[2]string{a.Agent, a.Rubric}] {
				continue
			}
			err, seen := judges[a.Agent]
			if !seen {
				var judge *agent.Agent
				if judge, err = loadAgent(a.Agent, runFlags{agents: agentsDir}, opts); err == nil {
					judge.Close()
				}
				judges[a.Agent] = err
			}
			if err != nil {
				probs = append(probs, fmt.Sprintf("%s: assertion %d (judge): agent %s: %v", at, j, a.Agent, err))
			}
		}
	}
	if len(probs) > 0 {
		return errors.New(strings.Join(probs, "; "))
	}
	return nil
}

// evalAgentOptions are the options the evaluated agents and the judges
// are built with: the built-in tools, the agents directory, the store's.
func evalAgentOptions(f evalFlags, storeOpts []agent.Option) []agent.Option {
	return append([]agent.Option{agent.WithTools(builtinTools(f.allowPrivate)), agent.WithAgents(spec.Dir{Path: f.agents})}, storeOpts...)
}

// evalTargets builds each --agent on each --model.
func evalTargets(f evalFlags, opts []agent.Option) ([]eval.Target, func(), error) {
	var agents []*agent.Agent
	closeAll := func() {
		for _, a := range agents {
			a.Close()
		}
	}
	models := f.models
	if len(models) == 0 {
		models = []string{""}
	}
	var out []eval.Target
	for _, ref := range f.targets {
		for _, model := range models {
			o := opts
			if model != "" {
				o = append(append([]agent.Option{}, opts...), agent.WithModel(modelName(model)))
			}
			a, err := loadAgent(ref, runFlags{agents: f.agents}, o)
			if err != nil {
				return nil, closeAll, fmt.Errorf("--agent %s: %w", ref, err)
			}
			agents = append(agents, a)
			sp := a.Spec()
			label := sp.AgentName + "@" + sp.Version
			if model != "" {
				label += " on " + model
			}
			if slices.ContainsFunc(out, func(t eval.Target) bool { return t.Label == label }) {
				return nil, closeAll, fmt.Errorf("--agent %s: %s is given twice", ref, label)
			}
			out = append(out, eval.Target{Label: label, Agent: a, PerRun: freshScript(ref, model, &sp, f.agents)})
		}
	}
	return out, closeAll, nil
}

// freshScript gives each run of a scripted agent its own copy of the
// script, played from its first turn, as agentry run plays it.
func freshScript(ref, model string, sp *spec.Spec, agentsDir string) func() ([]agent.RunOption, error) {
	name := modelName(model)
	if name == "" {
		name = sp.ModelName
		dir := filepath.Join(agentsDir, sp.AgentName)
		if st, err := os.Stat(ref); err == nil && !st.IsDir() {
			dir = filepath.Dir(ref)
		}
		if path, ok := strings.CutPrefix(name, "scripted:"); ok && !filepath.IsAbs(path) {
			name = "scripted:" + filepath.Join(dir, path)
		}
	}
	if !strings.HasPrefix(name, "scripted:") {
		return nil
	}
	return func() ([]agent.RunOption, error) {
		m, err := llm.Open(name, llm.Config{})
		if err != nil {
			return nil, err
		}
		return []agent.RunOption{agent.WithSessionProvider(m.Provider)}, nil
	}
}
