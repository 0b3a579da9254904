package main

import (
	"fmt"
	"io"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/agentry/agentry/store"
)

func newAuditCmd(stdout io.Writer) *cobra.Command {
	var dsn, runID string
	var verify, asJSON bool
	cmd := &cobra.Command{
		Use:   "audit",
		Short: "List the policy layer's audit records, or verify their chain",
		Long: `List the audit records of the run store: every decision of the policy layer other
than a plain allow (who, what, which rule, the decision, why, when), oldest first.
--verify checks the hash chain instead and names the first record that was
edited or removed; exit 1 when the chain is broken.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			st, err := openStore(cmd.Context(), dsn)
			if err != nil {
				return usageErr(err)
			}
			defer st.Close()
			if verify {
				if err := st.VerifyAudit(cmd.Context()); err != nil {
					return runFailed(err)
				}
				recs, err := st.AuditLog(cmd.Context(), "")
				if err != nil {
					return runFailed(err)
				}
				fmt.Fprintf(stdout, "the audit chain holds: %d records\n", len(recs))
				return nil
			}
			recs, err := st.AuditLog(cmd.Context(), runID)
			if err != nil {
				return runFailed(err)
			}
			if asJSON {
				if recs == nil {
					recs = []store.AuditRecord{}
				}
				return writeJSON(stdout, recs)
			}
			if len(recs) == 0 {
				fmt.Fprintln(stdout, "no audit records")
				return nil
			}
			tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "SEQ\tTIME\tRUN\tAGENT\tUSER\tRULE\tDECISION\tTARGET\tREASON")
			for _, r := range recs {
				fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", r.Seq, r.Time.Local().Format("2006-01-02 15:04:05"), r.RunID,
					r.Agent, r.UserID, r.Rule, r.Decision, r.Target, oneLine(r.Reason, 80))
			}
			return tw.Flush()
		},
	}
	dbFlag(cmd, &dsn)
	cmd.Flags().StringVar(&runID, "run", "", "only the records of this run")
	cmd.Flags().BoolVar(&verify, "verify", false, "check the hash chain of every record")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the records as JSON")
	return cmd
}
