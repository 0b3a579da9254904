package main

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"

	"github.com/agentry/agentry/agent"
	"github.com/agentry/agentry/pipeline"
	"github.com/agentry/agentry/spec"
)

func newValidateCmd(stdout, stderr io.Writer) *cobra.Command {
	var agentsDir string
	var lock bool
	cmd := &cobra.Command{
		Use:   "validate PATH...",
		Short: "Check agent specs: fields, schemas, enums, templates, tools, models",
		Long: `Check agent spec files, or agents directories laid out as
{agent_name}/{version}.json. Each spec is compiled as 'agentry run' would:
unknown fields, bad names and limits, enums that disagree with the output
schema, unknown tools and unreadable scripted models are reported with the
file and the field. Exit code 0 when all are valid, 2 otherwise.`,
		Args: func(_ *cobra.Command, args []string) error {
			if len(args) == 0 {
				return usageErr(errors.New("validate needs at least one spec file or agents directory"))
			}
			return nil
		},
		RunE: func(_ *cobra.Command, args []string) error {
			bad := 0
			for _, p := range args {
				bad += validatePath(p, agentsDir, lock, stdout, stderr)
			}
			if bad > 0 {
				return &exitError{code: 2, err: fmt.Errorf("%d invalid", bad)}
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&agentsDir, "agents", "agents", "agents directory for agent: tools of single spec files")
	cmd.Flags().BoolVar(&lock, "lock", false, "write each agents directory's lock file of output-schema hashes")
	return cmd
}

// validatePath checks a spec file or an agents directory and returns the
// number of invalid specs.
func validatePath(path, agentsDir string, writeLock bool, stdout, stderr io.Writer) int {
	st, err := os.Stat(path)
	if err != nil {
		fmt.Fprintf(stderr, "✗ %s: %v\n", path, err)
		return 1
	}
	tools := builtinTools(false)
	if data, err := os.ReadFile(path); err == nil && !st.IsDir() && pipeline.IsPipeline(data) {
		p, err := pipeline.FromFile(path, pipeline.WithTools(tools))
		if err == nil {
			p.Close()
		}
		return reportPipeline(path, err, stdout, stderr)
	}
	if !st.IsDir() {
		a, err := agent.FromFile(path, agent.WithTools(tools), agent.WithAgents(spec.Dir{Path: agentsDir}))
		if err == nil {
			a.Close()
		}
		return report(path, err, stdout, stderr)
	}
	bad := 0
	d := spec.Dir{Path: path}
	lockPath := filepath.Join(path, spec.LockFile)
	lk, err := spec.ReadLock(lockPath)
	if err != nil {
		fmt.Fprintf(stderr, "✗ %v\n", err)
		return 1
	}
	err = filepath.WalkDir(path, func(p string, e fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(path, p)
		parts := strings.Split(filepath.ToSlash(rel), "/")
		if e.IsDir() || !strings.HasSuffix(p, ".json") || len(parts) != 2 {
			return nil
		}
		ref := parts[0] + "@" + strings.TrimSuffix(parts[1], ".json")
		s, specPath, err := d.Load(ref)
		if err == nil {
			var a *agent.Agent
			if a, err = agent.New(s, agent.WithTools(tools), agent.WithAgents(d), agent.WithBaseDir(filepath.Dir(specPath))); err == nil {
				a.Close()
			}
		}
		if err == nil {
			err = lk.Add(s)
		}
		bad += report(p, err, stdout, stderr)
		return nil
	})
	if err != nil {
		fmt.Fprintf(stderr, "✗ %s: %v\n", path, err)
		bad++
	}
	if writeLock && bad == 0 {
		if err := lk.Write(lockPath); err != nil {
			fmt.Fprintf(stderr, "✗ %v\n", err)
			return bad + 1
		}
		fmt.Fprintf(stdout, "locked %s\n", lockPath)
	}
	return bad
}

func reportPipeline(path string, err error, stdout, stderr io.Writer) int {
	var de *pipeline.DefinitionError
	if errors.As(err, &de) {
		fmt.Fprintf(stderr, "✗ %s:\n", path)
		for _, p := range de.Problems {
			fmt.Fprintf(stderr, "    %s\n", p)
		}
		return 1
	}
	return report(path, err, stdout, stderr)
}

func report(path string, err error, stdout, stderr io.Writer) int {
	if err == nil {
		fmt.Fprintf(stdout, "✓ %s\n", path)
		return 0
	}
	var se *spec.Error
	if errors.As(err, &se) {
		fmt.Fprintf(stderr, "✗ %s:\n", path)
		for _, p := range se.Problems {
			fmt.Fprintf(stderr, "    %s\n", p)
		}
		return 1
	}
	fmt.Fprintf(stderr, "✗ %s: %v\n", path, err)
	return 1
}
