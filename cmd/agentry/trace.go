package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sort"
	"strings"

	"github.com/spf13/cobra"

	"github.com/agentry/agentry/agent"
	"github.com/agentry/agentry/eval"
	"github.com/agentry/agentry/runlog"
	"github.com/agentry/agentry/store"
)

func newTraceCmd(stdout io.Writer) *cobra.Command {
	var dsn string
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "trace RUN_ID",
		Short: "Show a stored run, turn by turn",
		Long: `Show a stored run turn by turn: each model call with its answer, each tool call with
its arguments and result. With --json, print the stored Result (what run --json
printed) with its events added.`,
		Args: exactlyOne("trace takes one run id"),
		RunE: func(cmd *cobra.Command, args []string) error {
			st, lo, err := openReading(cmd.Context(), dsn)
			if err != nil {
				return err
			}
			defer st.Close()
			l, err := runlog.Read(cmd.Context(), st, args[0], lo...)
			if err != nil {
				return storeErr(err)
			}
			if l.Run.Kind == eval.Kind {
				return usageErr(fmt.Errorf("%s is an evaluation: agentry eval show %s (its runs: agentry runs --parent %s)", l.Run.ID, l.Run.ID, l.Run.ID))
			}
			if asJSON {
				return printTraceJSON(stdout, l)
			}
			printTrace(stdout, l)
			// A pipeline's stages are runs of their own.
			children, err := st.List(cmd.Context(), store.Filter{ParentID: l.Run.ID, Limit: 1000})
			if err != nil {
				return runFailed(err)
			}
			for i := len(children) - 1; i >= 0; i-- {
				c := children[i]
				fmt.Fprintf(stdout, "  stage run %s  %s@%s  %s  (agentry trace %s)\n", c.ID, c.Name, c.Version, c.Status, c.ID)
			}
			return nil
		},
	}
	dbFlag(cmd, &dsn)
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the stored Result with its events as JSON")
	return cmd
}

func exactlyOne(msg string) cobra.PositionalArgs {
	return func(_ *cobra.Command, args []string) error {
		if len(args) != 1 {
			return usageErr(fmt.Errorf("%s, got %d arguments", msg, len(args)))
		}
		return nil
	}
}

// storeErr is a bad run id (exit 2) or a store that failed (exit 1).
func storeErr(err error) error {
	if errors.Is(err, store.ErrNotFound) {
		return usageErr(err)
	}
	return runFailed(err)
}

// printTraceJSON prints the stored Result, byte for byte what run --json
// printed, with "events" added as its last field.
func printTraceJSON(w io.Writer, l *runlog.Log) error {
	evs, err := l.Events()
	if err != nil {
		return runFailed(err)
	}
	events, err := json.Marshal(evs)
	if err != nil {
		return runFailed(err)
	}
	obj := bytes.TrimSpace(l.Result)
	if len(obj) < 2 || obj[0] != '{' {
		// The run has not ended: what is known of it.
		head, _ := json.Marshal(map[string]any{"id": l.Run.ID, "agent_name": l.Run.Name, "agent_version": l.Run.Version,
			"status": l.Run.Status})
		obj = head
	}
	var buf bytes.Buffer
	buf.Write(obj[:len(obj)-1])
	if len(obj) > 2 {
		buf.WriteByte(',')
	}
	buf.WriteString(`"events":`)
	buf.Write(events)
	buf.WriteByte('}')
	var out bytes.Buffer
	if err := json.Indent(&out, buf.Bytes(), "", "  "); err != nil {
		return runFailed(err)
	}
	out.WriteByte('\n')
	_, err = w.Write(out.Bytes())
	return err
}

func printTrace(w io.Writer, l *runlog.Log) {
	r, start := l.Run, &l.Start
	fmt.Fprintf(w, "run %s  %s@%s  %s  started %s\n", r.ID, r.Name, r.Version, r.Status, start.StartedAt.Local().Format("2006-01-02 15:04:05"))
	if len(start.Input) > 0 {
		keys := make([]string, 0, len(start.Input))
		for k := range start.Input {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			fmt.Fprintf(w, "  input %s = %s\n", k, oneLine(fmt.Sprint(start.Input[k]), 100))
		}
	}
	if start.Model != "" {
		fmt.Fprintf(w, "  model %s\n", start.Model)
	}
	tools := l.ToolCalls()
	turns := map[int]bool{}
	for _, t := range l.CallTurns {
		turns[t] = true
	}
	for _, c := range tools {
		turns[c.Turn] = true
	}
	order := make([]int, 0, len(turns))
	for t := range turns {
		order = append(order, t)
	}
	sort.Ints(order)
	resumed := map[int]bool{}
	for _, t := range l.Resumes {
		resumed[t] = true
	}
	for _, t := range order {
		if resumed[t] {
			fmt.Fprintf(w, "— resumed here —\n")
		}
		fmt.Fprintf(w, "turn %d\n", t)
		for i := range l.ModelCalls {
			if l.CallTurns[i] == t {
				printModelCall(w, &l.ModelCalls[i])
			}
		}
		for i := range tools {
			if tools[i].Turn == t {
				printToolCall(w, &tools[i])
			}
		}
	}
	switch {
	case r.Status == store.Interrupted:
		fmt.Fprintf(w, "interrupted: the process stopped; agentry resume %s continues it\n", r.ID)
	case r.Status == store.AwaitingApproval:
		fmt.Fprintf(w, "awaiting approval: agentry resume %s --approve CALL_ID or --deny CALL_ID\n", r.ID)
	case l.Result != nil:
		var res agent.Result
		if json.Unmarshal(l.Result, &res) == nil {
			fmt.Fprintf(w, "%s after %d turns, %d tokens, %s: %s\n", res.TerminateReason, res.Iterations, res.TokenUsage.TotalTokens,
				cost(res.EstimatedCost), oneLine(res.Decision, 200))
		}
	}
}

func printModelCall(w io.Writer, c *runlog.ModelCall) {
	who := "model"
	if c.Agent != "" {
		who = c.Agent
	}
	if c.Response == nil {
		msg := ""
		if c.Error != nil {
			msg = c.Error.Message
		}
		fmt.Fprintf(w, "  %s failed after %d attempts (%.0f ms): %s\n", who, c.Attempts, c.DurationMS, msg)
		return
	}
	u := c.Response.Usage
	fmt.Fprintf(w, "  %s %s  %d → %d tokens  %.0f ms\n", who, c.Response.Model, u.PromptTokens, u.CompletionTokens, c.DurationMS)
	if c.Response.Content != "" {
		fmt.Fprintf(w, "    %q\n", oneLine(c.Response.Content, 200))
	}
}

func printToolCall(w io.Writer, c *runlog.Call) {
	args := oneLine(string(c.Arguments), 120)
	switch {
	case c.Pending:
		fmt.Fprintf(w, "  ⋯ %s %s  sent, no result on record (the run stopped while it ran)\n", c.Tool, args)
	case c.Error != nil:
		fmt.Fprintf(w, "  ✗ %s %s  %s: %s  %.0f ms\n", c.Tool, args, c.Error.Type, oneLine(c.Error.Message, 160), c.DurationMS)
	default:
		fmt.Fprintf(w, "  → %s %s\n    ← %s  %.1f ms\n", c.Tool, args, oneLine(string(c.Output), 160), c.DurationMS)
	}
}

// oneLine shortens s to about n bytes on one line.
func oneLine(s string, n int) string {
	s = strings.Join(strings.Fields(s), " ")
	if len(s) <= n {
		return s
	}
	cut := n
	for cut > 0 && s[cut]&0xC0 == 0x80 {
		cut--
	}
	return s[:cut] + "…"
}
