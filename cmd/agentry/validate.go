package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"

	"github.com/spf13/cobra"

	"github.com/agentry/agentry/agent"
	"github.com/agentry/agentry/memory/inmem"
	"github.com/agentry/agentry/pipeline"
	"github.com/agentry/agentry/prompt"
	"github.com/agentry/agentry/spec"
	"github.com/agentry/agentry/store"
)

func newValidateCmd(stdout, stderr io.Writer) *cobra.Command {
	var agentsDir, dsn, prompts string
	var lock, strict bool
	cmd := &cobra.Command{
		Use:   "validate PATH...",
		Short: "Check agent specs: fields, schemas, enums, templates, tools, models",
		Long: `Check agent spec files, pipeline files, prompt template files ({"id",
"text", ...}), or agents directories laid out as {agent_name}/{version}.json. Each spec is compiled as 'agentry run' would:
unknown fields, bad names and limits, enums that disagree with the output
schema, unknown tools and unreadable scripted models are reported with the
file and the field, every problem of a file at once. Warnings (what is
valid but likely not meant) are printed under a valid file's ✓; with
--strict they make it invalid. Exit code 0 when all are valid, 2 otherwise.`,
		Args: func(_ *cobra.Command, args []string) error {
			if len(args) == 0 {
				return usageErr(errors.New("validate needs at least one spec file or agents directory"))
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			ps := &lazyPrompts{ctx: cmd.Context(), dsn: dsn, dir: prompts}
			defer ps.close()
			opts := checkOptions(ps)
			bad := 0
			v := validation{stdout: stdout, stderr: stderr, strict: strict}
			for _, p := range args {
				bad += v.path(p, agentsDir, lock, opts)
			}
			if bad > 0 {
				return &exitError{code: 2, err: fmt.Errorf("%d invalid", bad)}
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&agentsDir, "agents", "agents", "agents directory for agent: tools of single spec files")
	cmd.Flags().BoolVar(&lock, "lock", false, "write each agents directory's lock file of output-schema hashes")
	cmd.Flags().BoolVar(&strict, "strict", false, "a warning makes its file invalid (exit 2), as in CI")
	dbFlag(cmd, &dsn)
	promptsFlag(cmd, &prompts)
	return cmd
}

// checkOptions are the options an agent is built with to be checked
// rather than run: the built-in tools, the prompt store (opened when a
// spec has a prompt_ref), and an in-process memory standing in for the
// run store's.
func checkOptions(ps *lazyPrompts) []agent.Option {
	return []agent.Option{agent.WithTools(builtinTools(false)), agent.WithPrompts(ps), agent.WithMemory(inmem.New())}
}

// lazyPrompts is the prompt store of validate: the run store is opened
// only when a spec has a prompt_ref to check.
type lazyPrompts struct {
	ctx      context.Context
	dsn, dir string
	once     sync.Once
	st       store.Store
	ps       prompt.Store
	err      error
}

func (l *lazyPrompts) open() (prompt.Store, error) {
	l.once.Do(func() {
		l.st, l.err = openStore(l.ctx, l.dsn)
		if l.err == nil {
			l.ps = promptStore(l.st, l.dir)
		}
	})
	return l.ps, l.err
}

func (l *lazyPrompts) close() {
	if l.st != nil {
		l.st.Close()
	}
}

func (l *lazyPrompts) Get(ctx context.Context, id string, version string) (prompt.Template, error) {
	ps, err := l.open()
	if err != nil {
		return prompt.Template{}, err
	}
	return ps.Get(ctx, id, version)
}

func (l *lazyPrompts) Put(ctx context.Context, t prompt.Template) (prompt.Template, error) {
	return t, prompt.ErrReadOnly
}

func (l *lazyPrompts) List(ctx context.Context, f prompt.Filter) ([]prompt.Template, error) {
	ps, err := l.open()
	if err != nil {
		return nil, err
	}
	return ps.List(ctx, f)
}

// validatePath checks a spec file or an agents directory and returns the
// number of invalid specs.
// validation is one run of validate: where it writes.
type validation struct {
	stdout, stderr io.Writer
	strict         bool // --strict: a warning makes its file invalid
}

func (v validation) path(path, agentsDir string, writeLock bool, opts []agent.Option) int {
	stdout, stderr := v.stdout, v.stderr
	st, err := os.Stat(path)
	if err != nil {
		fmt.Fprintf(stderr, "✗ %s: %v\n", path, err)
		return 1
	}
	if data, err := os.ReadFile(path); err == nil && !st.IsDir() && isTemplate(data) {
		probs := templateProblems(path, nil)
		if len(probs) > 0 {
			fmt.Fprintf(stderr, "✗ %s:\n    error: %s\n", path, strings.Join(probs, "\n    error: "))
			return 1
		}
		fmt.Fprintf(stdout, "✓ %s\n", path)
		return 0
	}
	if data, err := os.ReadFile(path); err == nil && !st.IsDir() && pipeline.IsPipeline(data) {
		p, err := pipeline.FromFile(path, pipeline.WithTools(builtinTools(false)), pipeline.WithAgentOptions(opts...))
		var ws []spec.Issue
		if err == nil {
			ws = stageWarnings(p)
			p.Close()
		}
		return v.reportPipeline(path, err, ws...)
	}
	if !st.IsDir() {
		return v.file(path, agentsDir, opts)
	}
	bad := 0
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
		s, err := checkSpecFile(p, path, true, opts)
		if err == nil {
			err = lk.Add(s)
		}
		var ws []spec.Issue
		if err == nil {
			ws = s.Warnings()
		}
		bad += v.report(p, err, ws...)
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

// stageWarnings are the warnings of a pipeline's inline stage specs,
// each named by its stage.
func stageWarnings(p *pipeline.Pipeline) []spec.Issue {
	var ws []spec.Issue
	for _, st := range p.Definition().Stages {
		var sp spec.Spec
		if len(st.Agent) == 0 || st.Agent[0] != '{' || json.Unmarshal(st.Agent, &sp) != nil {
			continue // a reference: its file is validated on its own
		}
		for _, w := range sp.Warnings() {
			w.Message = "stage " + st.Name + ": " + w.Message
			ws = append(ws, w)
		}
	}
	return ws
}

func (v validation) reportPipeline(path string, err error, warnings ...spec.Issue) int {
	stderr := v.stderr
	var de *pipeline.DefinitionError
	if errors.As(err, &de) {
		fmt.Fprintf(stderr, "✗ %s:\n", path)
		for _, p := range de.Problems {
			fmt.Fprintf(stderr, "    error: %s\n", p)
		}
		return 1
	}
	return v.report(path, err, warnings...)
}

// report prints a file's one verdict, and its warnings under it: they
// do not make it invalid, unless the validation is strict.
func (v validation) report(path string, err error, warnings ...spec.Issue) int {
	stdout, stderr := v.stdout, v.stderr
	if err == nil && v.strict && len(warnings) > 0 {
		fmt.Fprintf(stderr, "✗ %s (--strict: its warnings are errors):\n", path)
		for _, w := range warnings {
			fmt.Fprintf(stderr, "    %s: %s\n", w.Severity, w.Message)
		}
		return 1
	}
	if err == nil {
		fmt.Fprintf(stdout, "✓ %s\n", path)
		for _, w := range warnings {
			fmt.Fprintf(stdout, "    %s: %s\n", w.Severity, w.Message)
		}
		return 0
	}
	var se *spec.Error
	if errors.As(err, &se) {
		fmt.Fprintf(stderr, "✗ %s:\n", path)
		for _, is := range se.Issues() {
			fmt.Fprintf(stderr, "    %s: %s\n", is.Severity, is.Message)
		}
		return 1
	}
	fmt.Fprintf(stderr, "✗ %s: %v\n", path, err)
	return 1
}

// laidOut refuses a spec file whose agent_name or version is not what
// its path says, {agent_name}/{version}.json, as the agents directory
// does: any file of an agents directory (inDir), and elsewhere a file
// named as a version ("v2", "1.3") in a folder an agent could be named
// after.
func laidOut(path string, s *spec.Spec, inDir bool) error {
	version := strings.TrimSuffix(filepath.Base(path), ".json")
	name := filepath.Base(filepath.Dir(path))
	if s.AgentName == name && s.Version == version {
		return nil
	}
	if !inDir && (version == "" || !(version[0] >= '0' && version[0] <= '9' || len(version) > 1 && version[0] == 'v' && version[1] >= '0' && version[1] <= '9') ||
		!spec.ValidName(name)) {
		return nil // a folder no agent could be named after is not an agents directory's
	}
	// The agents directory's own check, and its words.
	_, _, err := spec.Dir{Path: filepath.Dir(filepath.Dir(path))}.Load(name + "@" + version)
	return err
}

// checkSpecFile builds the spec file at path as run would, its agent:
// tools found in agentsDir, and checks where it lies: every problem of
// the spec, its tools and its place at once (a spec that does not build
// is still read as far as it reads, for its place). It returns the spec
// when it is valid.
func checkSpecFile(path, agentsDir string, inDir bool, opts []agent.Option) (*spec.Spec, error) {
	a, err := agent.FromFile(path, append(opts, agent.WithAgents(spec.Dir{Path: agentsDir}))...)
	var sp *spec.Spec
	if err == nil {
		s := a.Spec()
		sp = &s
		a.Close()
	}
	data, rerr := os.ReadFile(path)
	if rerr != nil {
		return nil, errors.Join(err, rerr)
	}
	lenient, _ := spec.Parse(path, data)
	if lenient == nil {
		return sp, err
	}
	if lerr := laidOut(path, lenient, inDir); lerr != nil {
		return nil, withProblems(err, path, lerr)
	}
	return sp, err
}

// withProblems adds more's problems to err's, as one *spec.Error when
// err is one (or nil).
func withProblems(err error, path string, more error) error {
	add := []string{more.Error()}
	if me := (*spec.Error)(nil); errors.As(more, &me) {
		add = me.Problems
	}
	var se *spec.Error
	switch {
	case err == nil:
		return &spec.Error{Source: path, Problems: add}
	case errors.As(err, &se):
		merged := *se
		merged.Problems = append(append([]string(nil), se.Problems...), add...)
		return &merged
	}
	return errors.Join(err, more)
}

// file checks one spec file, as run would build it, and where it lies.
func (v validation) file(path, agentsDir string, opts []agent.Option) int {
	sp, err := checkSpecFile(path, agentsDir, false, opts)
	var ws []spec.Issue
	if err == nil {
		ws = sp.Warnings()
	}
	return v.report(path, err, ws...)
}
