package main

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/agentry/agentry/agent"
	"github.com/agentry/agentry/spec"
)

// agentInfo is one agent of the directory as `agents` lists it.
type agentInfo struct {
	Name     string        `json:"name"`
	Versions []versionInfo `json:"versions"`
}

type versionInfo struct {
	Version     string   `json:"version"`
	Mode        string   `json:"mode"`
	Model       string   `json:"model,omitempty"`
	Tools       []string `json:"tools"`
	Description string   `json:"description,omitempty"`
	Error       string   `json:"error,omitempty"`
}

func newAgentsCmd(stdout io.Writer) *cobra.Command {
	var (
		dir, dsn, prompts string
		asJSON            bool
	)
	cmd := &cobra.Command{
		Use:   "agents",
		Short: "List the agents of an agents directory, with their versions",
		Long: `List every agent of the agents directory ({agent_name}/{version}.json), each version
with its mode, model and tools. A version whose spec is invalid is listed with its
problem, and the command exits 2.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			list, bad, err := listAgents(spec.Dir{Path: dir})
			if err != nil {
				return usageErr(err)
			}
			if bad == 0 {
				// The directory loads into one registry, as a program
				// that serves it would: each agent built, its tools,
				// sub-agents and handoffs found.
				ps := &lazyPrompts{ctx: cmd.Context(), dsn: dsn, dir: prompts}
				defer ps.close()
				reg, err := agent.LoadRegistry(spec.Dir{Path: dir}, checkOptions(ps)...)
				if err != nil {
					return usageErr(fmt.Errorf("--agents %s: %w", dir, err))
				}
				reg.Close()
			}
			if asJSON {
				if err := writeJSON(stdout, list); err != nil {
					return runFailed(err)
				}
			} else {
				printAgents(stdout, list)
			}
			if bad > 0 {
				return usageErr(fmt.Errorf("%d invalid agent version(s) in %s", bad, dir))
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&dir, "agents", "agents", "the agents directory")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the list as JSON")
	dbFlag(cmd, &dsn)
	promptsFlag(cmd, &prompts)
	return cmd
}

// listAgents reads every version of every agent of d; bad counts the
// versions whose spec does not load.
func listAgents(d spec.Dir) (list []agentInfo, bad int, err error) {
	names, err := d.Names()
	if err != nil {
		return nil, 0, fmt.Errorf("--agents %s: %w", d.Path, err)
	}
	list = []agentInfo{}
	for _, name := range names {
		versions, err := d.Versions(name)
		if err != nil || len(versions) == 0 {
			continue
		}
		info := agentInfo{Name: name}
		for _, v := range versions {
			vi := versionInfo{Version: v, Tools: []string{}}
			s, _, err := d.Load(name + "@" + v)
			if err != nil {
				vi.Error = err.Error()
				bad++
			} else {
				vi.Mode, vi.Model, vi.Description = string(s.Mode), s.ModelName, s.Description
				vi.Tools = append(vi.Tools, s.Tools...)
			}
			info.Versions = append(info.Versions, vi)
		}
		list = append(list, info)
	}
	return list, bad, nil
}

func printAgents(w io.Writer, list []agentInfo) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "AGENT\tVERSION\tMODE\tMODEL\tTOOLS")
	for _, a := range list {
		for _, v := range a.Versions {
			if v.Error != "" {
				fmt.Fprintf(tw, "%s\t%s\tinvalid\t\t%s\n", a.Name, v.Version, strings.ReplaceAll(v.Error, "\n", " "))
				continue
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", a.Name, v.Version, v.Mode, v.Model, strings.Join(v.Tools, ", "))
		}
	}
	tw.Flush()
}
