// Command agentry runs agents defined as JSON and checks their specs.
//
//	agentry run SPEC|NAME[@VERSION] [--agents DIR] [--input k=v]... [--input-file F]
//	            [--model PROVIDER:MODEL] [--json] [--events FILE]
//	            [--db DSN | --no-store] [--user ID] [--correlation-id ID]
//	            [--log-level L] [--log-format json|text]
//	            [--temporal HOST:PORT [--task-queue Q] [--detach]]
//	agentry worker --temporal HOST:PORT [--task-queue Q] [--agents DIR] [--db DSN]
//	agentry serve [--agents DIR] [--addr HOST:PORT] [--db DSN] [--temporal HOST:PORT]
//	agentry validate PATH...
//	agentry runs [--agent NAME] [--status S] [--limit N] [--json]
//	agentry runs prune --older-than DURATION
//	agentry trace RUN_ID [--json]
//	agentry replay RUN_ID [--tools recorded|live] [--json]
//	agentry resume RUN_ID [--model M] [--approve CALL_ID]... [--deny CALL_ID]... [--answer TEXT] [--temporal HOST:PORT]
//	agentry audit [--run RUN_ID] [--verify] [--json]
//	agentry version
//
// Exit codes: 0 success, 1 the run failed, 2 bad usage, spec or input, 3
// the run waits for approval (or a paused pipeline for an answer).
package main

import (
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/agentry/agentry/policy"
	"github.com/spf13/cobra"

	_ "github.com/agentry/agentry/llm/anthropic"
	_ "github.com/agentry/agentry/llm/gemini"
	_ "github.com/agentry/agentry/llm/openai"    // openai, ollama, openrouter
	_ "github.com/agentry/agentry/llm/scripted"  // the offline provider
	_ "github.com/agentry/agentry/prompt/liquid" // the liquid prompt engine
	_ "github.com/agentry/agentry/tool/a2a"      // a2a:URL tools
	_ "github.com/agentry/agentry/tool/files"    // the files connector
	_ "github.com/agentry/agentry/tool/mcp"      // mcp:SERVER/TOOL tools
	_ "github.com/agentry/agentry/tool/shell"    // the shell connector
	_ "github.com/agentry/agentry/tool/sqltool"  // the sql connector
)

// exitError carries an exit code through cobra.
type exitError struct {
	code int
	err  error
}

func (e *exitError) Error() string { return e.err.Error() }
func (e *exitError) Unwrap() error { return e.err }

func usageErr(err error) error  { return &exitError{code: 2, err: err} }
func runFailed(err error) error { return &exitError{code: 1, err: err} }

func main() {
	os.Exit(execute(os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
}

// execute runs the CLI and returns its exit code.
func execute(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	// What the binary says on stderr (progress, warnings, errors) may
	// quote a model, a tool or a store: each line goes out redacted.
	stderr = redacting{w: stderr, red: policy.Secrets()}
	root := newRoot(stdout, stderr)
	root.SetArgs(args)
	root.SetIn(stdin)
	err := root.Execute()
	if err == nil {
		return 0
	}
	var ee *exitError
	if errors.As(err, &ee) {
		if ee.err != nil {
			fmt.Fprintln(stderr, "agentry:", ee.err.Error())
		}
		return ee.code
	}
	// cobra's own errors: unknown command or flag, wrong arguments.
	fmt.Fprintln(stderr, "agentry:", err.Error())
	return 2
}

// redacting is a writer whose every write goes out redacted: the
// binary's messages are written whole, one write each.
type redacting struct {
	w   io.Writer
	red *policy.Redactor
}

func (r redacting) Write(p []byte) (int, error) {
	if _, err := r.w.Write(r.red.Bytes(p)); err != nil {
		return 0, err
	}
	return len(p), nil
}

func newRoot(stdout, stderr io.Writer) *cobra.Command {
	root := &cobra.Command{
		Use:           "agentry",
		Short:         "Run LLM agents defined as JSON",
		Long:          "agentry runs agents defined as JSON specs, shows what they do as they do it, and checks specs.",
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.SetOut(stdout)
	root.SetErr(stderr)
	root.AddCommand(newRunCmd(stdout, stderr), newChatCmd(stdout, stderr), newConversationsCmd(stdout), newValidateCmd(stdout, stderr), newRunsCmd(stdout), newTraceCmd(stdout),
		newReplayCmd(stdout, stderr), newResumeCmd(stdout, stderr), newAuditCmd(stdout), newPromptCmd(stdout), newAgentsCmd(stdout), newServeCmd(stdout, stderr), newHashKeyCmd(stdout), newMCPCmd(stdout, stderr), newEvalCmd(stdout, stderr), newWorkerCmd(stderr), newVersionCmd(stdout))
	root.Version = version()
	root.SetVersionTemplate("{{.Version}}\n")
	return root
}
