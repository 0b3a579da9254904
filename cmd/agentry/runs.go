package main

import (
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/agentry/agentry/eval"
	"github.com/agentry/agentry/internal/journal"
	"github.com/agentry/agentry/store"
)

func newRunsCmd(stdout io.Writer) *cobra.Command {
	var (
		dsn    string
		name   string
		parent string
		status string
		limit  int
		asJSON bool
	)
	cmd := &cobra.Command{
		Use:   "runs",
		Short: "List stored runs, newest first",
		Long: `List the runs in the run store, newest first. A run whose process died shows as
interrupted (agentry resume RUN_ID continues it).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if status != "" && !store.Status(status).Valid() {
				return usageErr(fmt.Errorf("--status %q: want running, completed, failed, aborted, awaiting_approval or interrupted", status))
			}
			st, err := openStore(cmd.Context(), dsn)
			if err != nil {
				return usageErr(err)
			}
			defer st.Close()
			// Runs whose holder died on this host are interrupted now, not
			// when their lease runs out.
			if _, err := journal.Interrupted(cmd.Context(), st); err != nil {
				return runFailed(err)
			}
			runs, err := st.List(cmd.Context(), store.Filter{Name: name, ParentID: parent, NotKind: eval.Kind, Status: store.Status(status), Limit: limit})
			if err != nil {
				return runFailed(err)
			}
			if asJSON {
				return writeJSON(stdout, runsJSON(runs))
			}
			printRuns(stdout, runs)
			return nil
		},
	}
	dbFlag(cmd, &dsn)
	cmd.Flags().StringVar(&name, "agent", "", "only the runs of this agent (or pipeline)")
	cmd.Flags().StringVar(&status, "status", "", "only runs in this status")
	cmd.Flags().StringVar(&parent, "parent", "", "only the runs of this run or evaluation (a sub-agent's, an evaluation's cases)")
	cmd.Flags().IntVar(&limit, "limit", 20, "at most this many runs")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the runs as JSON")
	cmd.AddCommand(newPruneCmd(stdout))
	return cmd
}

func newPruneCmd(stdout io.Writer) *cobra.Command {
	var dsn, older string
	cmd := &cobra.Command{
		Use:   "prune --older-than DURATION",
		Short: "Delete stored runs older than a duration (30d, 12h), with their logs",
		Long: `Delete the runs created longer ago than --older-than, with their logs; a run a live
process drives is kept. Durations are Go durations (90m, 12h) or days (30d).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			d, err := parseAge(older)
			if err != nil {
				return usageErr(fmt.Errorf("--older-than %q: %w", older, err))
			}
			st, err := openStore(cmd.Context(), dsn)
			if err != nil {
				return usageErr(err)
			}
			defer st.Close()
			n, err := st.Prune(cmd.Context(), time.Now().Add(-d))
			if err != nil {
				return runFailed(err)
			}
			fmt.Fprintf(stdout, "pruned %d runs\n", n)
			return nil
		},
	}
	dbFlag(cmd, &dsn)
	cmd.Flags().StringVar(&older, "older-than", "", "delete runs created longer ago than this (required)")
	return cmd
}

// parseAge reads a Go duration or a number of days ("30d").
func parseAge(s string) (time.Duration, error) {
	if s == "" {
		return 0, fmt.Errorf("a duration is required, say 30d or 12h")
	}
	if days, ok := strings.CutSuffix(s, "d"); ok {
		n, err := strconv.Atoi(days)
		if err != nil || n < 0 {
			return 0, fmt.Errorf("not a number of days")
		}
		return time.Duration(n) * 24 * time.Hour, nil
	}
	d, err := time.ParseDuration(s)
	if err != nil || d < 0 {
		return 0, fmt.Errorf("not a duration (say 30d, 12h or 90m)")
	}
	return d, nil
}

// runJSON is a run as runs --json prints it: the HTTP API's names
// (GET /v1/runs), and the lease's holder.
type runJSON struct {
	ID        string   `json:"run_id"`
	Kind      string   `json:"kind"`
	Name      string   `json:"agent"`
	Version   string   `json:"version"`
	Status    string   `json:"status"`
	ParentID  string   `json:"parent_run_id,omitempty"`
	SessionID string   `json:"session_id,omitempty"`
	User      string   `json:"user,omitempty"`
	Holder    string   `json:"holder,omitempty"`
	CreatedAt string   `json:"created_at"`
	UpdatedAt string   `json:"updated_at"`
	Outcome   string   `json:"outcome,omitempty"`
	Turns     int      `json:"turns"`
	Tokens    int      `json:"tokens"`
	CostUSD   *float64 `json:"cost_usd"`
	Error     string   `json:"error,omitempty"`
}

func runsJSON(runs []store.Run) []runJSON {
	out := make([]runJSON, 0, len(runs))
	for _, r := range runs {
		out = append(out, runJSON{ID: r.ID, Kind: r.Kind, Name: r.Name, Version: r.Version, Status: string(r.Status),
			ParentID: r.ParentID, SessionID: r.SessionID, User: r.User, Holder: r.Holder, CreatedAt: r.CreatedAt.UTC().Format(time.RFC3339Nano),
			UpdatedAt: r.UpdatedAt.UTC().Format(time.RFC3339Nano), Outcome: r.Outcome, Turns: r.Turns, Tokens: r.Tokens,
			CostUSD: r.CostUSD, Error: r.Error})
	}
	return out
}

func printRuns(w io.Writer, runs []store.Run) {
	if len(runs) == 0 {
		fmt.Fprintln(w, "no runs")
		return
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "RUN\tAGENT\tSTATUS\tSTARTED\tTURNS\tTOKENS\tCOST")
	for _, r := range runs {
		name := r.Name
		if r.Version != "" {
			name += "@" + r.Version
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d\t%d\t%s\n", r.ID, name, r.Status, r.CreatedAt.Local().Format("2006-01-02 15:04:05"),
			r.Turns, r.Tokens, cost(r.CostUSD))
	}
	tw.Flush()
}

func cost(c *float64) string {
	if c == nil {
		return "-"
	}
	return fmt.Sprintf("$%.4f", *c)
}

func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	if err := enc.Encode(v); err != nil {
		return runFailed(err)
	}
	return nil
}
