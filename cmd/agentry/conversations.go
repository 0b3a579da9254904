package main

import (
	"context"
	"fmt"
	"io"
	"slices"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/agentry/agentry/internal/ids"
	"github.com/agentry/agentry/runlog"
	"github.com/agentry/agentry/store"
)

func newConversationsCmd(stdout io.Writer) *cobra.Command {
	var dsn, user string
	var limit int
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "conversations",
		Short: "List the conversations in the run store, most recently updated first",
		Long: `List the conversations in the run store (agentry chat, or POST /v1/conversations on a
server), most recently updated first; show one, fork it at a run, or delete it.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return withConversations(cmd.Context(), dsn, func(_ store.Store, cs store.Conversations) error {
				list, err := cs.ListConversations(cmd.Context(), store.ConversationFilter{User: user, Limit: limit})
				if err != nil {
					return runFailed(err)
				}
				if asJSON {
					return writeJSON(stdout, list)
				}
				tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
				fmt.Fprintln(tw, "CONVERSATION\tUSER\tAGENT\tRUNS\tUPDATED\tFORKED FROM")
				for _, c := range list {
					fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%s\t%s\n", c.ID, c.User, c.Agent, c.Runs, c.UpdatedAt.Local().Format(time.DateTime), c.ForkedFrom)
				}
				return tw.Flush()
			})
		},
	}
	dbFlag(cmd, &dsn)
	cmd.Flags().StringVar(&user, "user", "", "only this user's conversations")
	cmd.Flags().IntVar(&limit, "limit", 20, "at most this many conversations")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print them as JSON")
	cmd.AddCommand(newConversationShowCmd(stdout), newConversationForkCmd(stdout), newConversationDeleteCmd(stdout))
	return cmd
}

// withConversations opens the run store of dsn and calls fn with it.
func withConversations(ctx context.Context, dsn string, fn func(store.Store, store.Conversations) error) error {
	st, err := openStore(ctx, dsn)
	if err != nil {
		return usageErr(err)
	}
	defer st.Close()
	cs, ok := st.(store.Conversations)
	if !ok {
		return usageErr(fmt.Errorf("--db: the run store (%T) keeps no conversations", st))
	}
	return fn(st, cs)
}

// withConversation opens the run store of dsn and calls fn with the
// conversation id.
func withConversation(ctx context.Context, dsn, id string, fn func(store.Store, store.Conversations, store.Conversation) error) error {
	return withConversations(ctx, dsn, func(st store.Store, cs store.Conversations) error {
		c, err := cs.Conversation(ctx, id)
		if err != nil {
			return runFailed(err)
		}
		return fn(st, cs, c)
	})
}

// turn is a run of a conversation as show prints it.
type turn struct {
	RunID  string       `json:"run_id"`
	Agent  string       `json:"agent"`
	Status store.Status `json:"status"`
	runlog.Exchange
}

func newConversationShowCmd(stdout io.Writer) *cobra.Command {
	var dsn string
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "show ID",
		Short: "Show a conversation: what was said and answered, run by run",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			return withConversation(ctx, dsn, args[0], func(st store.Store, _ store.Conversations, c store.Conversation) error {
				runs, err := st.List(ctx, store.Filter{Conversation: c.ID, Limit: 1000})
				if err != nil {
					return runFailed(err)
				}
				slices.Reverse(runs)
				opts, err := logOptions()
				if err != nil {
					return usageErr(err)
				}
				turns := make([]turn, 0, len(runs))
				for _, run := range runs {
					t := turn{RunID: run.ID, Agent: run.Name + "@" + run.Version, Status: run.Status}
					if x, err := runlog.ReadExchange(ctx, st, run.ID, opts...); err == nil {
						t.Exchange = x
					} else {
						t.Error = err.Error()
					}
					turns = append(turns, t)
				}
				if asJSON {
					return writeJSON(stdout, map[string]any{"conversation": c, "turns": turns})
				}
				fmt.Fprintf(stdout, "conversation %s  %d runs", c.ID, c.Runs)
				if c.ForkedFrom != "" {
					fmt.Fprintf(stdout, "  forked from %s at %s", c.ForkedFrom, c.ForkedAt)
				}
				fmt.Fprintln(stdout)
				for _, t := range turns {
					fmt.Fprintf(stdout, "\n> %v\n", t.Message)
					switch {
					case t.Error != "":
						fmt.Fprintf(stdout, "✗ %s\n", t.Error)
					case t.Answer != nil:
						printAnswer(stdout, t.Answer)
					}
					fmt.Fprintf(stdout, "  (%s, %s, %s)\n", t.RunID, t.Agent, t.Status)
				}
				return nil
			})
		},
	}
	dbFlag(cmd, &dsn)
	cmd.Flags().BoolVar(&asJSON, "json", false, "print it as JSON")
	return cmd
}

func newConversationForkCmd(stdout io.Writer) *cobra.Command {
	var dsn, at string
	cmd := &cobra.Command{
		Use:   "fork ID",
		Short: "Fork a conversation at one of its runs (default: the last that ended)",
		Long: `Fork a conversation: the fork starts from the history up to and including the run
--at names (default: its last run that ended), and goes its own way; the original is
unchanged. It prints the fork's id (agentry chat AGENT --conversation FORK goes on in it).`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			return withConversation(ctx, dsn, args[0], func(st store.Store, cs store.Conversations, c store.Conversation) error {
				if at == "" {
					runs, err := st.List(ctx, store.Filter{Conversation: c.ID, Limit: 1000})
					if err != nil {
						return runFailed(err)
					}
					for _, run := range runs {
						if ended(run.Status) {
							at = run.ID
							break
						}
					}
					if at == "" {
						return runFailed(fmt.Errorf("conversation %s has no run that ended to fork at", c.ID))
					}
				}
				fork := ids.New("conv")
				if err := cs.Fork(ctx, c.ID, at, store.Conversation{ID: fork, User: c.User, Agent: c.Agent}); err != nil {
					return runFailed(err)
				}
				fmt.Fprintln(stdout, fork)
				return nil
			})
		},
	}
	dbFlag(cmd, &dsn)
	cmd.Flags().StringVar(&at, "at", "", "the run to fork at")
	return cmd
}

// ended says whether a run ended (and so has a history to fork at).
func ended(s store.Status) bool {
	return s == store.Completed || s == store.Failed || s == store.Aborted
}

func newConversationDeleteCmd(stdout io.Writer) *cobra.Command {
	var dsn, by string
	cmd := &cobra.Command{
		Use:   "delete ID",
		Short: "Delete a conversation with its runs and their logs",
		Long: `Delete a conversation with its runs, their sub-runs and all their logs, so that none of
what was said is left in the store (SQLite's free pages included). The audit log records the
deletion, with no content. A conversation whose run goes on is not deleted.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			return withConversations(ctx, dsn, func(_ store.Store, cs store.Conversations) error {
				ids, err := cs.DeleteConversation(ctx, args[0], by)
				if err != nil {
					return runFailed(err)
				}
				fmt.Fprintf(stdout, "deleted conversation %s and its %d runs\n", args[0], len(ids))
				return nil
			})
		},
	}
	dbFlag(cmd, &dsn)
	cmd.Flags().StringVar(&by, "by", "operator", "who deletes it, as the audit log records")
	return cmd
}
