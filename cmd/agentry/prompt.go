package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/user"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/agentry/agentry/internal/strictjson"
	"github.com/agentry/agentry/policy"
	"github.com/agentry/agentry/prompt"
	"github.com/agentry/agentry/spec"
	"github.com/agentry/agentry/store"
)

func newPromptCmd(stdout io.Writer) *cobra.Command {
	var dsn, dir string
	cmd := &cobra.Command{
		Use:   "prompt",
		Short: "Put, get, list, render and validate versioned prompt templates",
		Long: `The prompt store keeps versioned, immutable templates: each put makes the next
version of its id, audited. Templates are read from --prompts DIR
({id}/{version}.json files) first, then from the run store (--db), then from the
built-in ReAct templates (id "react"). A spec uses one with "prompt_ref":
"id@version" (or "id" for the latest).`,
	}
	cmd.PersistentFlags().StringVar(&dsn, "db", "", "the run store, which keeps the templates (env AGENTRY_DB)")
	cmd.PersistentFlags().StringVar(&dir, "prompts", os.Getenv("AGENTRY_PROMPTS"), "a directory of templates, {id}/{version}.json, read first (env AGENTRY_PROMPTS)")
	open := func(ctx context.Context) (prompt.Store, store.Store, error) {
		st, err := openStore(ctx, dsn)
		if err != nil {
			return nil, nil, usageErr(err)
		}
		return promptStore(st, dir), st, nil
	}
	cmd.AddCommand(newPromptPutCmd(stdout, &dsn), newPromptGetCmd(stdout, open), newPromptListCmd(stdout, open),
		newPromptRenderCmd(stdout, open), newPromptValidateCmd(stdout))
	return cmd
}

// readTemplate reads a template file strictly; put gives the version.
func readTemplate(path string) (prompt.Template, error) {
	var t prompt.Template
	data, err := os.ReadFile(path)
	if err != nil {
		return t, err
	}
	if err := strictjson.Decode(data, &t); err != nil {
		return t, fmt.Errorf("%s: %w", path, err)
	}
	return t, nil
}

// readPolicy reads --policy: an agent spec (its policy) or a policy.
func readPolicy(path string) (*policy.Policy, error) {
	if path == "" {
		return nil, nil
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("--policy: %w", err)
	}
	var probe map[string]json.RawMessage
	if json.Unmarshal(data, &probe) == nil && probe["agent_name"] != nil {
		sp, err := spec.Load(path)
		if err != nil {
			return nil, fmt.Errorf("--policy: %w", err)
		}
		if sp.Policy == nil {
			return nil, fmt.Errorf("--policy %s: the spec has no policy", path)
		}
		return sp.Policy, nil
	}
	p, err := policy.Parse(data)
	if err != nil {
		return nil, fmt.Errorf("--policy %s: %w", path, err)
	}
	return p, nil
}

func newPromptPutCmd(stdout io.Writer, dsn *string) *cobra.Command {
	var by, policyPath string
	cmd := &cobra.Command{
		Use:   "put FILE",
		Short: "Store a template as a new version of its id",
		Long: `Store the template in FILE ({"id", "text", "engine", "required_vars", "metadata"},
and "version" if you choose it) in the run store, and print its reference.
Versions are strings ("v2", "3", "1.2.0") and never change: a version the
store has is refused. Without one, put gives the next counted version: one
more than the greatest of the form N or vN ("v3" after "v2", "4" after "3"),
"1" for the first. The template is validated first; with --policy (a policy, or a spec with one) its
content filters on "prompt" run on the text: block refuses the put, redact
stores the text redacted. Each decision and the put are audit records.`,
		Args: exactlyOne("put takes one template file"),
		RunE: func(cmd *cobra.Command, args []string) error {
			t, err := readTemplate(args[0])
			if err != nil {
				return usageErr(err)
			}
			p, err := readPolicy(policyPath)
			if err != nil {
				return usageErr(err)
			}
			if probs := prompt.Validate(t); len(probs) > 0 {
				return usageErr(fmt.Errorf("%s: %s", args[0], strings.Join(probs, "; ")))
			}
			if t.CreatedBy = by; by == "" {
				if u, err := user.Current(); err == nil {
					t.CreatedBy = u.Username
				}
			}
			ctx := cmd.Context()
			st, err := openStore(ctx, *dsn)
			if err != nil {
				return usageErr(err)
			}
			defer st.Close()
			text, applied := p.Apply(policy.Prompt, t.Text)
			for _, a := range applied {
				reason := "redacted in the template's text"
				if a.Action == policy.Block {
					reason = "the content filter " + a.Filter + " found what it blocks in the template's text"
				}
				if _, err := st.AppendAudit(ctx, store.AuditRecord{UserID: t.CreatedBy, Rule: "content_filters." + a.Filter,
					Decision: string(a.Action), Target: "prompt:" + t.ID, Reason: reason}); err != nil {
					return runFailed(err)
				}
				if a.Action == policy.Block {
					return runFailed(fmt.Errorf("%s: %s (policy.content_filters)", t.ID, reason))
				}
			}
			t.Text = text
			ps, ok := st.(interface{ Prompts() prompt.Store })
			if !ok {
				return usageErr(errors.New("this run store keeps no prompts"))
			}
			t, err = ps.Prompts().Put(ctx, t)
			if errors.Is(err, prompt.ErrInvalid) { // a version put before, one that cannot follow
				return usageErr(err)
			}
			if err != nil {
				return runFailed(err)
			}
			fmt.Fprintln(stdout, t.Ref())
			return nil
		},
	}
	cmd.Flags().StringVar(&by, "by", "", "who puts it (default: the user)")
	cmd.Flags().StringVar(&policyPath, "policy", "", "a policy (or a spec with one) whose prompt filters the text passes")
	return cmd
}

type opener func(ctx context.Context) (prompt.Store, store.Store, error)

func getTemplate(ctx context.Context, open opener, ref string) (prompt.Template, error) {
	id, version, err := prompt.ParseRef(ref)
	if err != nil {
		return prompt.Template{}, usageErr(err)
	}
	ps, st, err := open(ctx)
	if err != nil {
		return prompt.Template{}, err
	}
	defer st.Close()
	t, err := ps.Get(ctx, id, version)
	if errors.Is(err, prompt.ErrNotFound) {
		return t, usageErr(err)
	}
	if err != nil {
		return t, runFailed(err)
	}
	return t, nil
}

func newPromptGetCmd(stdout io.Writer, open opener) *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "get ID[@VERSION]",
		Short: "Print a template's text (the latest version when none is given)",
		Args:  exactlyOne("get takes one template reference"),
		RunE: func(cmd *cobra.Command, args []string) error {
			t, err := getTemplate(cmd.Context(), open, args[0])
			if err != nil {
				return err
			}
			if asJSON {
				return writeJSON(stdout, t)
			}
			fmt.Fprintln(stdout, t.Text)
			return nil
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the whole template as JSON")
	return cmd
}

func newPromptListCmd(stdout io.Writer, open opener) *cobra.Command {
	var f prompt.Filter
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "list",
		Short: "List templates: the latest version of each, or --all",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ps, st, err := open(cmd.Context())
			if err != nil {
				return err
			}
			defer st.Close()
			ts, err := ps.List(cmd.Context(), f)
			if err != nil {
				return runFailed(err)
			}
			if asJSON {
				if ts == nil {
					ts = []prompt.Template{}
				}
				return writeJSON(stdout, ts)
			}
			tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "TEMPLATE\tENGINE\tTAGS\tBY\tCREATED")
			for _, t := range ts {
				created := ""
				if !t.CreatedAt.IsZero() {
					created = t.CreatedAt.Local().Format("2006-01-02 15:04")
				}
				engine := string(t.Engine)
				if engine == "" {
					engine = string(prompt.FString)
				}
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", t.Ref(), engine, strings.Join(t.Tags(), ","), t.CreatedBy, created)
			}
			return tw.Flush()
		},
	}
	cmd.Flags().StringVar(&f.ID, "id", "", "only this id")
	cmd.Flags().StringVar(&f.Tag, "tag", "", "only templates with this tag (metadata.tags)")
	cmd.Flags().BoolVar(&f.AllVersions, "all", false, "every version, not only the latest")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the templates as JSON")
	return cmd
}

func newPromptRenderCmd(stdout io.Writer, open opener) *cobra.Command {
	var inputs []string
	var lenient, asJSON bool
	cmd := &cobra.Command{
		Use:   "render ID[@VERSION]",
		Short: "Render a template with input values",
		Long: `Render a template with --input key=value (repeatable; --param is the same flag)
and print the text; --json prints the text, a token estimate and the few-shot
examples. A variable the template uses that no --input gives is an error
(exit 2), unless --lenient, which renders it empty (required variables are
still needed).`,
		Args: exactlyOne("render takes one template reference"),
		RunE: func(cmd *cobra.Command, args []string) error {
			vals := map[string]any{}
			for _, kv := range inputs {
				k, v, ok := strings.Cut(kv, "=")
				if !ok || k == "" {
					return usageErr(fmt.Errorf("--input %q: want key=value", kv))
				}
				vals[k] = v
			}
			t, err := getTemplate(cmd.Context(), open, args[0])
			if err != nil {
				return err
			}
			r, err := t.Render(vals, !lenient)
			if err != nil {
				return usageErr(err)
			}
			if asJSON {
				return writeJSON(stdout, r)
			}
			fmt.Fprintln(stdout, r.Text)
			return nil
		},
	}
	cmd.Flags().StringArrayVar(&inputs, "input", nil, "a variable as key=value (repeatable), as run takes its input")
	// --param, the flag's name before it was run's, stays as an alias.
	cmd.Flags().SetNormalizeFunc(func(_ *pflag.FlagSet, name string) pflag.NormalizedName {
		if name == "param" {
			name = "input"
		}
		return pflag.NormalizedName(name)
	})
	cmd.Flags().BoolVar(&lenient, "lenient", false, "render variables without a value empty instead of failing")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the rendering as JSON (text, tokens, examples)")
	return cmd
}

func newPromptValidateCmd(stdout io.Writer) *cobra.Command {
	var policyPath string
	cmd := &cobra.Command{
		Use:   "validate FILE...",
		Short: "Check template files: engine, syntax, required variables, few-shot examples, content filters",
		Long: `Check each template file as put would: its id and version, that its engine
parses its text, that each required variable is used, its few-shot examples,
and with --policy that no content filter on "prompt" blocks it. Exit 2 when
any is invalid, as for any bad input.`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			p, err := readPolicy(policyPath)
			if err != nil {
				return usageErr(err)
			}
			bad := 0
			for _, path := range args {
				if probs := templateProblems(path, p); len(probs) > 0 {
					bad++
					fmt.Fprintf(stdout, "%s: invalid\n  %s\n", path, strings.Join(probs, "\n  "))
					continue
				}
				fmt.Fprintf(stdout, "%s: ok\n", path)
			}
			if bad > 0 {
				return usageErr(fmt.Errorf("%d of %d templates are invalid", bad, len(args)))
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&policyPath, "policy", "", "a policy (or a spec with one) whose prompt filters the text must pass")
	return cmd
}

// templateProblems checks the template file at path as put would, and
// against the prompt filters of p (nil: none).
func templateProblems(path string, p *policy.Policy) []string {
	t, err := readTemplate(path)
	if err != nil {
		return []string{err.Error()}
	}
	probs := prompt.Validate(t)
	_, applied := p.Apply(policy.Prompt, t.Text)
	if f, blocked := policy.Blocked(applied); blocked {
		probs = append(probs, "the content filter "+f+" of the policy blocks the text")
	}
	return probs
}

// isTemplate reports whether data is a prompt template rather than an
// agent spec or a pipeline: an object with "id" and "text".
func isTemplate(data []byte) bool {
	var probe map[string]json.RawMessage
	return json.Unmarshal(data, &probe) == nil && probe["id"] != nil && probe["text"] != nil && probe["agent_name"] == nil
}
