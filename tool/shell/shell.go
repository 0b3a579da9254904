//go:build unix

package shell

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/agentry/agentry/internal/strictjson"
	"github.com/agentry/agentry/tool"
)

// Options configure the shell tool.
type Options struct {
	// Allow names the programs the tool may run (bare names, looked up in
	// the tool's PATH). Required: an empty allowlist runs nothing.
	Allow []string
	// Dir is the working directory, and the root that a call's "dir"
	// stays under. Required.
	Dir string
	// Timeout bounds a run; at its end the program's process group is
	// killed. Default 10s.
	Timeout time.Duration
	// MaxOutput caps what is kept of stdout and of stderr; default 64 KiB.
	MaxOutput int
	// Env is the programs' environment beside PATH, HOME (the working
	// directory) and LANG; nothing of agentry's own environment passes.
	Env map[string]string
	// AllowExec names the programs of Allow that may run other programs
	// (sh, env, xargs, git, find with -exec, …): New refuses such a
	// program in Allow unless it is named here too, and a call refuses
	// find's -exec and the like unless find is.
	AllowExec []string
	// Unconfined runs the programs as the process's own user sees the
	// system. By default each is confined (Landlock, on Linux): it reads
	// and runs the system's programs and libraries, reads and writes the
	// working directory, and reaches nothing else, nor the network unless
	// Network says so; New refuses where the kernel cannot confine.
	Unconfined bool
	// Network lets a confined program open TCP connections and ports.
	Network bool
}

// tokenVar carries a value of each call's own in the program's
// environment, inherited by what it starts: at the end of the call,
// every process that carries it is killed, wherever it has gone.
const tokenVar = "AGENTRY_SHELL_CALL"

// searchPath is where allowed programs are looked up.
const searchPath = "/usr/local/bin:/usr/bin:/bin"

type args struct {
	Argv []string `json:"argv" jsonschema:"The program and its arguments, one string each; no shell syntax is interpreted."`
	Dir  string   `json:"dir,omitempty" jsonschema:"A directory under the working directory to run in."`
}

// Result is what the shell tool returns.
type Result struct {
	ExitCode  int    `json:"exit_code"`
	Stdout    string `json:"stdout"`
	Stderr    string `json:"stderr"`
	Truncated bool   `json:"truncated,omitempty"`
	TimedOut  bool   `json:"timed_out,omitempty"`
}

// New returns the shell tool.
func New(o Options) (tool.Tool, error) {
	if len(o.Allow) == 0 {
		return nil, errors.New("allow: name the programs the shell tool may run (it runs none otherwise)")
	}
	for i, p := range o.Allow {
		if p == "" || strings.ContainsAny(p, "/\\") {
			return nil, fmt.Errorf("allow[%d] %q: a bare program name, looked up in %s", i, p, searchPath)
		}
	}
	if err := checkAllow(o.Allow, o.AllowExec); err != nil {
		return nil, err
	}
	if o.Dir == "" {
		return nil, errors.New("dir: the working directory is required")
	}
	if st, err := os.Stat(o.Dir); err != nil || !st.IsDir() {
		return nil, fmt.Errorf("dir %s: not a directory", o.Dir)
	}
	if real, err := filepath.EvalSymlinks(o.Dir); err == nil {
		o.Dir = real // the sandbox's rule is for the directory itself
	}
	if !o.Unconfined {
		if why := sandboxable(o.Network); why != "" {
			return nil, fmt.Errorf("the shell tool confines its programs, and %s; give it \"sandbox\": false (Options.Unconfined) to run them unconfined", why)
		}
	}
	if o.Timeout <= 0 {
		o.Timeout = 10 * time.Second
	}
	if o.MaxOutput <= 0 {
		o.MaxOutput = 64 << 10
	}
	return tool.Func("shell", "Run one allowed program ("+strings.Join(o.Allow, ", ")+") with its arguments as a list "+
		"(no shell syntax), in the working directory; returns its exit code, stdout and stderr.",
		func(ctx context.Context, a args) (*Result, error) { return run(ctx, o, a) },
		tool.WithIdempotency(tool.NonIdempotent), tool.WithTimeout(o.Timeout+5*time.Second))
}

func run(ctx context.Context, o Options, a args) (*Result, error) {
	if len(a.Argv) == 0 {
		return nil, tool.NewErrorDetails("invalid_arguments", "argv is empty: give the program and its arguments", true)
	}
	prog := a.Argv[0]
	if !slices.Contains(o.Allow, prog) {
		return nil, tool.NewErrorDetails("policy_violation", fmt.Sprintf("program %q is not on the allowlist (%s)", prog, strings.Join(o.Allow, ", ")), true)
	}
	if err := checkArgs(a.Argv, o.AllowExec); err != nil {
		return nil, tool.NewErrorDetails("policy_violation", err.Error(), true)
	}
	bin, err := lookPath(prog)
	if err != nil {
		return nil, tool.NewErrorDetails("not_found", err.Error(), false)
	}
	dir := o.Dir
	if a.Dir != "" {
		if filepath.IsAbs(a.Dir) || slices.Contains(strings.Split(filepath.ToSlash(a.Dir), "/"), "..") {
			return nil, tool.NewErrorDetails("invalid_arguments", fmt.Sprintf("dir %q leaves the working directory", a.Dir), true)
		}
		dir = filepath.Join(o.Dir, a.Dir)
		if real, err := filepath.EvalSymlinks(dir); err != nil || !within(real, o.Dir) {
			return nil, tool.NewErrorDetails("invalid_arguments", fmt.Sprintf("dir %q is not a directory under the working directory", a.Dir), true)
		}
	}
	ctx, cancel := context.WithTimeout(ctx, o.Timeout)
	defer cancel()
	token := rand.Text()
	cmd := exec.CommandContext(ctx, bin, a.Argv[1:]...)
	cmd.Dir = dir
	cmd.Env = append(environment(o), tokenVar+"="+token)
	if !o.Unconfined {
		path, args, rules, err := sandboxed(bin, a.Argv, o.Dir, o.Network)
		if err != nil {
			return nil, tool.NewErrorDetails("exec_failed", err.Error(), false)
		}
		cmd.Path, cmd.Args, cmd.Env = path, args, append(cmd.Env, rules)
	}
	cmd.SysProcAttr = procAttr()
	tr := newTracker(token)
	cmd.Cancel = func() error { tr.kill(); return nil }
	cmd.WaitDelay = time.Second // a child that keeps the pipes open does not hold the call
	stdout, stderr := &capped{max: o.MaxOutput}, &capped{max: o.MaxOutput}
	cmd.Stdout, cmd.Stderr = stdout, stderr
	if err = cmd.Start(); err == nil {
		tr.begin(cmd.Process.Pid)
		err = cmd.Wait()
	}
	tr.close() // what it left behind, in its group or not
	res := &Result{Stdout: stdout.String(), Stderr: stderr.String(), Truncated: stdout.cut || stderr.cut,
		TimedOut: errors.Is(ctx.Err(), context.DeadlineExceeded)}
	var ee *exec.ExitError
	switch {
	case err == nil:
	case errors.As(err, &ee):
		res.ExitCode = ee.ExitCode()
	case res.TimedOut || errors.Is(err, exec.ErrWaitDelay):
		res.ExitCode = -1
	default:
		return nil, tool.NewErrorDetails("exec_failed", err.Error(), false)
	}
	if res.TimedOut {
		res.ExitCode = -1
	}
	return res, nil
}

// lookPath finds prog in searchPath alone.
func lookPath(prog string) (string, error) {
	for _, d := range filepath.SplitList(searchPath) {
		p := filepath.Join(d, prog)
		if st, err := os.Stat(p); err == nil && !st.IsDir() && st.Mode()&0o111 != 0 {
			return p, nil
		}
	}
	return "", fmt.Errorf("program %q is not in %s", prog, searchPath)
}

func within(path, root string) bool {
	r, err := filepath.EvalSymlinks(root)
	if err != nil {
		return false
	}
	rel, err := filepath.Rel(r, path)
	return err == nil && rel != ".." && !strings.HasPrefix(rel, "../")
}

func environment(o Options) []string {
	env := []string{"PATH=" + searchPath, "HOME=" + o.Dir, "LANG=C.UTF-8"}
	for k, v := range o.Env {
		env = append(env, k+"="+v)
	}
	return env
}

// capped keeps the first max bytes written to it.
type capped struct {
	buf bytes.Buffer
	max int
	cut bool
}

func (c *capped) Write(p []byte) (int, error) {
	if room := c.max - c.buf.Len(); room < len(p) {
		c.cut = true
		if room > 0 {
			c.buf.Write(p[:room])
		}
		return len(p), nil
	}
	return c.buf.Write(p)
}

func (c *capped) String() string { return strings.ToValidUTF8(c.buf.String(), "\uFFFD") }

// config is the spec's "connectors": {"shell": {...}}.
type config struct {
	Allow     []string          `json:"allow"`
	Dir       string            `json:"dir"`
	TimeoutMS int64             `json:"timeout_ms,omitempty"`
	MaxOutput int               `json:"max_output_bytes,omitempty"`
	Env       map[string]string `json:"env,omitempty"`
	AllowExec []string          `json:"allow_exec,omitempty"`
	// Sandbox false runs the programs unconfined; Network lets confined
	// ones reach the network.
	Sandbox *bool `json:"sandbox,omitempty"`
	Network bool  `json:"network,omitempty"`
}

func init() {
	tool.RegisterConnector("shell", func(raw json.RawMessage, baseDir string) ([]tool.Tool, func() error, error) {
		var c config
		if err := strictjson.Decode(raw, &c); err != nil {
			return nil, nil, err
		}
		if c.TimeoutMS < 0 || c.MaxOutput < 0 {
			return nil, nil, errors.New("timeout_ms and max_output_bytes must not be negative")
		}
		dir := c.Dir
		if dir != "" && !filepath.IsAbs(dir) {
			dir = filepath.Join(baseDir, dir)
		}
		t, err := New(Options{Allow: c.Allow, Dir: dir, Timeout: time.Duration(c.TimeoutMS) * time.Millisecond, MaxOutput: c.MaxOutput, Env: c.Env,
			AllowExec: c.AllowExec, Unconfined: c.Sandbox != nil && !*c.Sandbox, Network: c.Network})
		if err != nil {
			return nil, nil, err
		}
		return []tool.Tool{t}, nil, nil
	})
}
