package main

import (
	"fmt"
	"io"

	"github.com/spf13/cobra"

	"github.com/agentry/agentry/agent"
	"github.com/agentry/agentry/eval"
)

func newReplayCmd(stdout, stderr io.Writer) *cobra.Command {
	var f runFlags
	var tools string
	cmd := &cobra.Command{
		Use:   "replay RUN_ID",
		Short: "Run a stored run again against its recording and report what differs",
		Long: `Run the stored run's spec again against its recorded model turns, with no model
call. Tool results are the recorded ones; with --tools live, safe and idempotent
tools run again and their results are compared (non-idempotent tools keep their
recorded results). Reports the first step that differs, and each after it; exit
code 0 when the replay is identical, 1 when anything differs.`,
		Args: exactlyOne("replay takes one run id"),
		RunE: func(cmd *cobra.Command, args []string) error {
			if tools != "recorded" && tools != "live" {
				return usageErr(fmt.Errorf("--tools %q: want recorded or live", tools))
			}
			ctx := cmd.Context()
			st, err := openStore(ctx, f.db)
			if err != nil {
				return usageErr(err)
			}
			defer st.Close()
			if run, err := st.Get(ctx, args[0]); err != nil {
				return storeErr(err)
			} else if run.Kind == eval.Kind {
				return usageErr(fmt.Errorf("%s is an evaluation, not a run: agentry eval rescore scores its runs again, and each of them replays", run.ID))
			}
			opts, err := storedAgentOptions(f, stderr)
			if err != nil {
				return usageErr(err)
			}
			so, err := storeOptions(st, f.prompts)
			if err != nil {
				return usageErr(err)
			}
			a, err := agent.Stored(ctx, st, args[0], append(opts, so...)...)
			if err != nil {
				return usageErr(err)
			}
			defer a.Close()
			var ro []agent.RunOption
			if tools == "live" {
				ro = append(ro, agent.LiveTools())
			}
			rep, err := a.Replay(ctx, st, args[0], ro...)
			if err != nil {
				return runFailed(err)
			}
			if f.json {
				if err := writeJSON(stdout, map[string]any{"run_id": rep.RunID, "identical": rep.Identical(),
					"differences": nonNil(rep.Differences), "result": rep.Result}); err != nil {
					return err
				}
			} else {
				printReplay(stdout, rep)
			}
			if !rep.Identical() {
				return &exitError{code: 1}
			}
			return nil
		},
	}
	dbFlag(cmd, &f.db)
	promptsFlag(cmd, &f.prompts)
	cmd.Flags().StringVar(&tools, "tools", "recorded", "recorded: the recorded tool results; live: run safe and idempotent tools again")
	cmd.Flags().BoolVar(&f.json, "json", false, "print the report as JSON")
	cmd.Flags().BoolVar(&f.allowPrivate, "allow-private-network", false, "let http_get and http_request reach loopback and private addresses")
	return cmd
}

func nonNil(d []agent.Difference) []agent.Difference {
	if d == nil {
		return []agent.Difference{}
	}
	return d
}

func printReplay(w io.Writer, rep *agent.ReplayReport) {
	if rep.Identical() {
		fmt.Fprintf(w, "replay of run %s: identical (%d turns, %d tool calls)\n", rep.RunID, rep.Result.Iterations, len(rep.Result.Steps))
		return
	}
	fmt.Fprintf(w, "replay of run %s: %d differences; the first:\n", rep.RunID, len(rep.Differences))
	for i, d := range rep.Differences {
		if i == 1 {
			fmt.Fprintln(w, "then:")
		}
		fmt.Fprintf(w, "  %s\n", d)
	}
}
