package main

import (
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"maps"
	"math"
	"os"
	"slices"
	"strings"
	"sync"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/agentry/agentry/agent"
	"github.com/agentry/agentry/eval"
	"github.com/agentry/agentry/store"
)

// judgeWith runs judge agents of the agents directory (eval.AgentJudge):
// each is built once (close closes them), a scripted one given a fresh
// script for each verdict.
func judgeWith(agentsDir string, opts []agent.Option, st store.Store) (judge eval.Judge, close func()) {
	var mu sync.Mutex
	judges := map[string]*agent.Agent{}
	close = func() {
		mu.Lock()
		defer mu.Unlock()
		for _, j := range judges {
			j.Close()
		}
	}
	find := func(ref string) (*agent.Agent, []agent.RunOption, error) {
		mu.Lock()
		defer mu.Unlock()
		j, ok := judges[ref]
		if !ok {
			var err error
			if j, err = loadAgent(ref, runFlags{agents: agentsDir}, opts); err != nil {
				return nil, nil, err
			}
			judges[ref] = j
		}
		sp := j.Spec()
		if fresh := freshScript(ref, "", &sp, agentsDir); fresh != nil {
			more, err := fresh()
			return j, more, err
		}
		return j, nil, nil
	}
	return eval.AgentJudge(st, find), close
}

// judgesOf are the judges (and rubrics) a report has verdicts of.
func judgesOf(rep *eval.Report) map[[2]string]bool {
	out := map[[2]string]bool{}
	for _, a := range rep.Agents {
		for _, cr := range a.Cases {
			for _, ck := range cr.Checks {
				if ck.Type == "judge" && ck.Score != nil {
					out[[2]string{ck.Judge, ck.Rubric}] = true
				}
			}
		}
	}
	return out
}

// progressBar draws how many runs are done on stderr, in place; nil when
// stderr is not a terminal (a CI log).
func progressBar(w io.Writer) func(done, total int) {
	if f, ok := w.(*os.File); !ok || !isTerminal(f) {
		return nil
	}
	return func(done, total int) {
		const width = 30
		n := width * done / max(total, 1)
		fmt.Fprintf(w, "\r[%s%s] %d/%d runs", strings.Repeat("#", n), strings.Repeat(".", width-n), done, total)
	}
}

// writeReport prints rep as JSON or as tables, and writes --junit.
func writeReport(w io.Writer, rep *eval.Report, asJSON bool, junit string) error {
	if junit != "" {
		if err := writeJUnit(junit, rep); err != nil {
			return fmt.Errorf("--junit: %w", err)
		}
	}
	if asJSON {
		return writeJSON(w, rep)
	}
	printReport(w, rep)
	return nil
}

func printReport(w io.Writer, rep *eval.Report) {
	fmt.Fprintf(w, "evaluation %s of %s", rep.ID, rep.Dataset)
	if rep.RescoreOf != "" {
		fmt.Fprintf(w, " (a rescore of %s)", rep.RescoreOf)
	}
	fmt.Fprintln(w)
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "AGENT\tPASSED\tPASS@K\tSTEPS/TASK\tTOOL ERRORS\tTOKENS\tCOST\tDURATION")
	for _, a := range rep.Agents {
		fmt.Fprintf(tw, "%s\t%d/%d (%.0f%%)\t%.0f%%\t%.2f\t%.0f%% of %d\t%d\t%s\t%.0fms\n", a.Agent, a.Passed, a.Total, 100*a.PassRate,
			100*a.PassAtK, a.StepsPerTask, 100*a.ToolErrorRate, a.ToolCalls, a.TokenUsage, costText(a.CostUSD), a.DurationMS)
	}
	tw.Flush()
	fmt.Fprintln(w)
	tw = tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	head := "CASE"
	for _, a := range rep.Agents {
		head += "\t" + a.Agent
	}
	fmt.Fprintln(tw, head)
	for i, cr := range rep.Agents[0].Cases {
		row := cr.Case
		if rep.Trials > 1 {
			row += fmt.Sprintf(" #%d", cr.Trial)
		}
		for _, a := range rep.Agents {
			if i < len(a.Cases) {
				row += "\t" + verdict(a.Cases[i])
			}
		}
		fmt.Fprintln(tw, row)
	}
	tw.Flush()
	printDetails(w, rep)
	for _, c := range []*eval.Comparison{rep.Comparison, rep.Baseline} {
		if c != nil {
			printComparison(w, c)
		}
	}
	if len(rep.NotRun) > 0 {
		fmt.Fprintf(w, "\nnot run (new in the dataset): %s\n", strings.Join(rep.NotRun, ", "))
	}
}

// printDetails lists each agent's tool latencies and tags, then every
// failed check whole (the table cuts them).
func printDetails(w io.Writer, rep *eval.Report) {
	for _, a := range rep.Agents {
		var tools, tags []string
		for _, name := range slices.Sorted(maps.Keys(a.ToolLatencyMS)) {
			l := a.ToolLatencyMS[name]
			tools = append(tools, fmt.Sprintf("%s p50 %.1fms p95 %.1fms (%d calls)", name, l.P50, l.P95, l.Calls))
		}
		for _, name := range slices.Sorted(maps.Keys(a.Tags)) {
			tags = append(tags, fmt.Sprintf("%s %d/%d", name, a.Tags[name].Passed, a.Tags[name].Total))
		}
		if len(tools)+len(tags) > 0 {
			fmt.Fprintf(w, "\n%s: tools %s; tags %s", a.Agent, listOrNone(tools), listOrNone(tags))
		}
	}
	fmt.Fprintln(w)
	for _, a := range rep.Agents {
		for _, cr := range a.Cases {
			for _, ck := range cr.Checks {
				if !ck.Passed {
					fmt.Fprintf(w, "  %s#%d on %s: %s (run %s)\n", cr.Case, cr.Trial, a.Agent, checkText(ck), runOf(cr, ck))
				}
			}
		}
	}
}

func printComparison(w io.Writer, c *eval.Comparison) {
	fmt.Fprintf(w, "\n%s against %s", c.To, c.From)
	if c.Baseline != "" {
		fmt.Fprintf(w, " of %s", c.Baseline)
	}
	fmt.Fprintf(w, ": pass rate %+.1f points, steps %+.2f, tokens %+d", 100*c.PassRateDelta, c.StepsDelta, c.TokenDelta)
	if c.CostDelta != nil {
		fmt.Fprintf(w, ", cost %+.6f USD", *c.CostDelta)
	}
	fmt.Fprintf(w, ", duration %+.0fms\n", c.DurationDelta)
	fmt.Fprintf(w, "  regressions (passed, now fail): %s\n  fixes (failed, now pass): %s\n", listOrNone(c.Regressions), listOrNone(c.Fixes))
}

// checkText is a check as a line says it: its type and reason, and the
// turn of a conversation case it is of.
func checkText(ck eval.Check) string {
	s := ck.Type + ": " + ck.Reason
	if ck.Turn > 0 {
		s = fmt.Sprintf("turn %d %s", ck.Turn, s)
	}
	return s
}

// runOf is the run a check is of: its turn's, in a conversation case.
func runOf(cr eval.CaseResult, ck eval.Check) string {
	if ck.Turn > 0 && ck.Turn <= len(cr.Runs) {
		return cr.Runs[ck.Turn-1]
	}
	return cr.RunID
}

// verdict is PASS, or FAIL with the first failed check's reason (cut
// to keep the table readable: --json has it whole).
func verdict(cr eval.CaseResult) string {
	if cr.Passed {
		return "PASS"
	}
	for _, ck := range cr.Checks {
		if !ck.Passed {
			s := "FAIL " + checkText(ck)
			if r := []rune(s); len(r) > 72 {
				s = string(r[:69]) + "..."
			}
			return s
		}
	}
	return "FAIL"
}

func isTerminal(f *os.File) bool {
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}

func costText(c *float64) string {
	if c == nil {
		return "unknown"
	}
	return fmt.Sprintf("$%.6f", *c)
}

func listOrNone(l []string) string {
	if len(l) == 0 {
		return "none"
	}
	return strings.Join(l, ", ")
}

// The JUnit XML CI systems read: a suite per agent, a case per trial.
type junitSuites struct {
	XMLName xml.Name     `xml:"testsuites"`
	Suites  []junitSuite `xml:"testsuite"`
}

type junitSuite struct {
	Name     string      `xml:"name,attr"`
	Tests    int         `xml:"tests,attr"`
	Failures int         `xml:"failures,attr"`
	Time     float64     `xml:"time,attr"`
	Cases    []junitCase `xml:"testcase"`
}

type junitCase struct {
	Name      string        `xml:"name,attr"`
	Classname string        `xml:"classname,attr"`
	Failure   *junitFailure `xml:"failure,omitempty"`
}

type junitFailure struct {
	Message string `xml:"message,attr"`
	Text    string `xml:",chardata"`
}

func writeJUnit(path string, rep *eval.Report) error {
	var out junitSuites
	for _, a := range rep.Agents {
		s := junitSuite{Name: rep.Dataset + " / " + a.Agent, Tests: a.Total, Failures: a.Total - a.Passed, Time: math.Round(a.DurationMS) / 1000}
		for _, cr := range a.Cases {
			jc := junitCase{Name: fmt.Sprintf("%s#%d", cr.Case, cr.Trial), Classname: rep.Dataset}
			if !cr.Passed {
				var lines []string
				for _, ck := range cr.Checks {
					if !ck.Passed {
						lines = append(lines, checkText(ck))
					}
				}
				jc.Failure = &junitFailure{Message: verdict(cr), Text: strings.Join(lines, "\n") + "\nrun " + cr.RunID}
			}
			s.Cases = append(s.Cases, jc)
		}
		out.Suites = append(out.Suites, s)
	}
	b, err := xml.MarshalIndent(out, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, append([]byte(xml.Header), append(b, '\n')...), 0o644)
}

func newEvalListCmd(stdout io.Writer) *cobra.Command {
	var dsn string
	var asJSON bool
	var limit int
	cmd := &cobra.Command{
		Use:   "list",
		Short: "List the stored evaluations, newest first",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			st, err := openStore(cmd.Context(), dsn)
			if err != nil {
				return usageErr(err)
			}
			defer st.Close()
			runs, err := eval.List(cmd.Context(), st, store.Filter{Limit: limit})
			if err != nil {
				return runFailed(err)
			}
			if asJSON {
				type row struct {
					ID      string `json:"id"`
					Dataset string `json:"dataset"`
					Created string `json:"created_at"`
					Status  string `json:"status"`
					Result  string `json:"result"`
				}
				rows := []row{}
				for _, r := range runs {
					rows = append(rows, row{ID: r.ID, Dataset: r.Name, Status: string(r.Status), Result: r.Outcome, Created: r.CreatedAt.UTC().Format("2006-01-02T15:04:05Z")})
				}
				return writeJSON(stdout, rows)
			}
			tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "EVALUATION\tDATASET\tCREATED\tSTATUS\tRESULT")
			for _, r := range runs {
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", r.ID, r.Name, r.CreatedAt.Local().Format("2006-01-02 15:04:05"), r.Status, r.Outcome)
			}
			return tw.Flush()
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the list as JSON")
	cmd.Flags().IntVar(&limit, "limit", 50, "at most this many evaluations")
	dbFlag(cmd, &dsn)
	return cmd
}

func newEvalShowCmd(stdout io.Writer) *cobra.Command {
	var dsn string
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "show EVAL_ID",
		Short: "Show a stored evaluation's report",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			st, lo, err := openReading(cmd.Context(), dsn)
			if err != nil {
				return err
			}
			defer st.Close()
			rep, err := eval.Stored(cmd.Context(), st, args[0], lo...)
			if errors.Is(err, store.ErrNotFound) || errors.Is(err, eval.ErrNotEvaluation) {
				return usageErr(err)
			} else if err != nil {
				return runFailed(err)
			}
			return writeReport(stdout, rep, asJSON, "")
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the report as JSON")
	dbFlag(cmd, &dsn)
	return cmd
}

func newEvalRescoreCmd(stdout io.Writer) *cobra.Command {
	f := evalFlags{maxRegression: -1}
	cmd := &cobra.Command{
		Use:   "rescore EVAL_ID [DATASET]",
		Short: "Score a stored evaluation's runs again with a dataset's assertions, running no agent",
		Long: `Score the runs of a stored evaluation again with the assertions of DATASET (changed since,
say), reading the runs' Results from the run store: no evaluated agent runs again, and none of
its models or tools is called. A judge's verdict on the same case and output with the same
rubric is reused; only a new judge assertion runs its judge agent (from --agents). The rescore
is stored as an evaluation of its own, compared with the one it rescored. Without DATASET the
evaluation's own dataset, as stored, scores it again (a judge's new rubric, say, or a new
release's assertions).`,
		Args: cobra.RangeArgs(1, 2),
		RunE: func(cmd *cobra.Command, args []string) error {
			st, lo, err := openReading(cmd.Context(), f.db)
			if err != nil {
				return err
			}
			defer st.Close()
			var ds *eval.Dataset
			if len(args) == 2 {
				ds, err = eval.Load(args[1])
			} else {
				ds, err = eval.StoredDataset(cmd.Context(), st, args[0], lo...)
			}
			if err != nil {
				return usageErr(err)
			}
			so, err := storeOptions(st, f.prompts)
			if err != nil {
				return usageErr(err)
			}
			if f.failUnder < 0 || f.failUnder > 1 {
				return usageErr(fmt.Errorf("--fail-under %v: want a pass rate, 0..1", f.failUnder))
			}
			opts := evalAgentOptions(f, so)
			old, err := eval.Stored(cmd.Context(), st, args[0], lo...)
			if errors.Is(err, store.ErrNotFound) || errors.Is(err, eval.ErrNotEvaluation) {
				return usageErr(err)
			} else if err != nil {
				return runFailed(err)
			}
			if err := checkJudges(ds, f.agents, opts, judgesOf(old)); err != nil {
				return usageErr(err)
			}
			judge, closeJudges := judgeWith(f.agents, opts, st)
			defer closeJudges()
			rep, err := eval.Rescore(cmd.Context(), st, args[0], ds, judge, lo...)
			if errors.Is(err, store.ErrNotFound) || errors.Is(err, eval.ErrNotEvaluation) {
				return usageErr(err)
			} else if err != nil {
				return runFailed(err)
			}
			if err := writeReport(stdout, rep, f.asJSON, f.junit); err != nil {
				return runFailed(err)
			}
			return f.gates(rep)
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&f.agents, "agents", "agents", "the agents directory, for judge agents")
	fl.BoolVar(&f.asJSON, "json", false, "print the report as JSON")
	fl.StringVar(&f.junit, "junit", "", "write the report as JUnit XML to this file")
	fl.Float64Var(&f.failUnder, "fail-under", 0, "exit 1 when an agent's pass rate is under this (0..1)")
	dbFlag(cmd, &f.db)
	promptsFlag(cmd, &f.prompts)
	return cmd
}
