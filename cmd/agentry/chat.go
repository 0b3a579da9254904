package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"os/signal"
	"strings"

	"github.com/spf13/cobra"

	"github.com/agentry/agentry/agent"
	"github.com/agentry/agentry/event"
	"github.com/agentry/agentry/internal/ids"
	"github.com/agentry/agentry/store"
)

func newChatCmd(stdout, stderr io.Writer) *cobra.Command {
	var f runFlags
	var conv string
	cmd := &cobra.Command{
		Use:   "chat SPEC|NAME[@VERSION]",
		Short: "Talk with an agent: a conversation that remembers what was said",
		Long: `Talk with an agent in a conversation (docs/conversations.md): each line you type is a
message, and the agent's run starts from what was said before. Answers stream to stdout as
they are written, tool calls show on stderr as they happen, and a call that waits for
approval is asked about (y/N). Ctrl-C aborts the run, not the chat. /new starts a new
conversation, /fork forks this one at its last run, /exit (or end of input) leaves.
With a pipe on stdin, each line is a message (or the answer to an approval): scriptable.
The conversation is kept in the run store: --conversation ID goes on with one.`,
		Args: func(_ *cobra.Command, args []string) error {
			if len(args) != 1 {
				return usageErr(fmt.Errorf("chat takes one spec file or agent name, got %d arguments", len(args)))
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			return chat(cmd.Context(), args[0], f, conv, cmd.InOrStdin(), stdout, stderr)
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&conv, "conversation", "", "go on with this conversation (default: a new one, its id printed)")
	fl.StringVar(&f.agents, "agents", "agents", "agents directory for NAME[@VERSION] and agent: tools")
	fl.StringVar(&f.model, "model", "", "model to use instead of the spec's model_name (PROVIDER:MODEL)")
	fl.BoolVar(&f.unlisted, "model-unlisted", false, "--model is not in its provider's catalog on purpose")
	fl.StringVar(&f.user, "user", "", "the id of the user the conversation is for")
	fl.BoolVarP(&f.quiet, "quiet", "q", false, "no tool calls on stderr")
	agentFlags(cmd, &f)
	dbFlag(cmd, &f.db)
	return cmd
}

// chatter is one chat: the agent, the store, the conversation, and where
// lines come from and answers go.
type chatter struct {
	a      *agent.Agent
	st     store.Store
	cs     store.Conversations
	conv   string
	opts   []agent.RunOption // each run's: the store, the user, the listener
	lines  <-chan string     // stdin, a line at a time; closed at its end
	sig    <-chan os.Signal  // Ctrl-C
	tty    bool              // stdin is a terminal: prompts, and Ctrl-C does not end the chat
	out    io.Writer
	errw   io.Writer
	stream *chatStream
}

func chat(ctx context.Context, target string, f runFlags, conv string, stdin io.Reader, stdout, stderr io.Writer) error {
	quiet := f.quiet
	f.quiet = true // the chat prints its own progress
	su, err := prepare(ctx, f, stderr)
	if err != nil {
		return usageErr(err)
	}
	defer su.close()
	cs, ok := su.store.(store.Conversations)
	if !ok {
		return usageErr(fmt.Errorf("--db: the run store (%T) keeps no conversations", su.store))
	}
	a, err := loadAgent(target, f, su.agentOpts)
	if err != nil {
		return usageErr(err)
	}
	defer a.Close()
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, os.Interrupt)
	defer signal.Stop(sig)
	quit := make(chan struct{})
	defer close(quit)
	c := &chatter{a: a, st: su.store, cs: cs, conv: conv, lines: readLines(stdin, quit), sig: sig, tty: readsTerminal(stdin), out: stdout, errw: stderr,
		stream: &chatStream{out: stdout, errw: stderr, quiet: quiet}}
	c.opts = append(su.sessionOpts, agent.WithStore(su.store), agent.WithEvents(c.stream.handle))
	if c.conv == "" {
		c.conv = ids.New("conv")
	}
	c.say("conversation %s with %s (/new, /fork, /exit)", c.conv, a.Name())
	return c.loop(ctx)
}

// say writes a line of the chat's own to stderr.
func (c *chatter) say(format string, args ...any) { fmt.Fprintf(c.errw, format+"\n", args...) }

// loop reads a line at a time until /exit or the end of the input.
func (c *chatter) loop(ctx context.Context) error {
	for {
		if c.tty {
			fmt.Fprint(c.out, "> ")
		}
		var line string
		select {
		case l, ok := <-c.lines:
			if !ok {
				return nil
			}
			line = strings.TrimSpace(l)
		case <-c.sig:
			if !c.tty {
				return nil
			}
			fmt.Fprintln(c.out)
			c.say("(/exit or Ctrl-D to leave)")
			continue
		case <-ctx.Done():
			return nil
		}
		switch line {
		case "":
		case "/exit", "/quit":
			return nil
		case "/new":
			c.conv = ids.New("conv")
			c.say("conversation %s", c.conv)
		case "/fork":
			c.fork(ctx)
		default:
			c.message(ctx, line)
		}
	}
}

// fork forks the conversation at its last run that ended, and goes on in
// the fork.
func (c *chatter) fork(ctx context.Context) {
	runs, err := c.st.List(ctx, store.Filter{Conversation: c.conv, Limit: 100})
	if err != nil {
		c.say("✗ %v", err)
		return
	}
	for _, run := range runs {
		if run.Status == store.Completed || run.Status == store.Failed || run.Status == store.Aborted {
			fork := ids.New("conv")
			if err := c.cs.Fork(ctx, c.conv, run.ID, store.Conversation{ID: fork, User: run.User}); err != nil {
				c.say("✗ %v", err)
				return
			}
			c.say("conversation %s, forked from %s at run %s", fork, c.conv, run.ID)
			c.conv = fork
			return
		}
	}
	c.say("✗ conversation %s has no run that ended to fork at", c.conv)
}

// message runs the agent on a line in the conversation, asking about the
// calls that wait for approval until the run ends.
func (c *chatter) message(ctx context.Context, line string) {
	input, err := c.a.MessageInput(line)
	if err != nil {
		c.say("✗ %v", err)
		return
	}
	for settled := false; ; settled = true {
		sess, err := c.a.NewSession(input, append(c.opts, agent.WithConversation(c.conv))...)
		if err != nil {
			c.say("✗ %v", err)
			return
		}
		var busy *store.BusyError
		if !errors.As(c.drive(ctx, sess), &busy) || settled || !settles(busy) || !c.settle(ctx, busy) {
			return
		}
	}
}

// drive runs sess to its end, asking about the calls it waits for, and
// answers the error it ended with.
func (c *chatter) drive(ctx context.Context, sess *agent.Session) error {
	for {
		res, err := c.run(ctx, sess)
		switch {
		case errors.Is(err, agent.ErrAwaitingApproval):
			if sess = c.decide(ctx, res); sess != nil {
				continue
			}
		case errors.Is(err, agent.ErrAborted):
			c.say("(aborted)")
		case errors.Is(err, store.ErrBusy):
			if busy := (*store.BusyError)(nil); !errors.As(err, &busy) || !settles(busy) {
				c.say("✗ %v", err)
			}
		case err != nil:
			c.say("✗ %s", res.Error.Message)
		}
		return err
	}
}

// settles says whether the chat can end the run that holds the
// conversation (settle): one that waits for a person, or whose process died.
func settles(busy *store.BusyError) bool {
	return busy.Status == store.Interrupted || busy.Status == store.AwaitingApproval
}

// settle ends the run that holds the conversation when the chat can: one
// that waits for approval (its calls are asked about) or was interrupted
// (its process died: it goes on where it stopped). It says whether that
// run ended, so that the message can be sent.
func (c *chatter) settle(ctx context.Context, busy *store.BusyError) bool {
	sess, err := c.a.Resume(ctx, c.st, busy.RunID, c.opts...)
	if err != nil {
		c.say("✗ run %s of conversation %s is %s and does not go on here: %v (agentry resume %s)", busy.RunID, busy.Conversation, busy.Status, err, busy.RunID)
		return false
	}
	state := "was interrupted"
	if busy.Status == store.AwaitingApproval {
		state = "waits for approval"
	}
	c.say("run %s of this conversation %s: it goes on first", busy.RunID, state)
	err = c.drive(ctx, sess)
	return err == nil || !errors.Is(err, agent.ErrAwaitingApproval) && !errors.Is(err, store.ErrBusy)
}

// run runs sess, streaming its answer; Ctrl-C aborts it.
func (c *chatter) run(ctx context.Context, sess *agent.Session) (*agent.Result, error) {
	type ended struct {
		res *agent.Result
		err error
	}
	done := make(chan ended, 1)
	c.stream.begin()
	go func() {
		res, err := sess.Run(ctx)
		done <- ended{res, err}
	}()
	for {
		select {
		case e := <-done:
			c.stream.end(e.res)
			return e.res, e.err
		case <-c.sig:
			sess.Abort()
		}
	}
}

// decide asks about each call the run waits for (y approves, anything
// else denies) and returns the session that goes on with the decisions.
// Ctrl-C (or the end of the input) at a question aborts the run: the
// session returned ends it aborted, with what it did, at once.
func (c *chatter) decide(ctx context.Context, res *agent.Result) *agent.Session {
	var approve, deny []string
	abort := false
	for _, w := range res.Waiting {
		fmt.Fprintf(c.out, "approve %s %s? [y/N] ", w.Tool, oneLine(string(w.Arguments), 200))
		var answer string
		var ok bool
		select {
		case answer, ok = <-c.lines:
			abort = !ok
		case <-c.sig:
			abort = true
		}
		if abort {
			fmt.Fprintln(c.out)
			break
		}
		if a := strings.ToLower(strings.TrimSpace(answer)); a == "y" || a == "yes" {
			approve = append(approve, w.Key)
		} else {
			deny = append(deny, w.Key)
		}
	}
	opts := append(c.opts[:len(c.opts):len(c.opts)], agent.Approve(approve...), agent.Deny(deny...), agent.DecidedBy("chat"))
	if abort {
		opts = c.opts
	}
	sess, err := c.a.Resume(ctx, c.st, res.ID, opts...)
	if err != nil {
		c.say("✗ %v", err)
		return nil
	}
	if abort {
		sess.Abort()
	}
	return sess
}

// readLines sends r's lines, then closes the channel; it stops sending
// when quit is closed.
func readLines(r io.Reader, quit <-chan struct{}) <-chan string {
	out := make(chan string)
	go func() {
		defer close(out)
		sc := bufio.NewScanner(r)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		for sc.Scan() {
			select {
			case out <- sc.Text():
			case <-quit:
				return
			}
		}
	}()
	return out
}

// readsTerminal says whether r is a terminal.
func readsTerminal(r io.Reader) bool {
	f, ok := r.(*os.File)
	return ok && isTerminal(f)
}

// chatStream prints a run of the chat as it goes: the answer's text on
// stdout as it is written, tool calls on stderr.
type chatStream struct {
	out, errw io.Writer
	quiet     bool
	streamed  bool           // this run's text was streamed
	midLine   bool           // the last text streamed ended no line
	printed   map[string]int // each run's last turn whose text was printed
	before    map[string]int // printed, as this part of the run began
}

// begin readies the stream for a run, or for the part of one that goes
// on after an approval: the turns it goes through again from its log
// were printed already.
func (s *chatStream) begin() {
	s.streamed, s.midLine = false, false
	if s.printed == nil {
		s.printed = map[string]int{}
	}
	s.before = maps.Clone(s.printed)
}

func (s *chatStream) handle(e event.Event) {
	if e.ParentRunID != "" {
		return // a sub-agent's
	}
	switch e.Type {
	case event.ContentChunk:
		if e.Turn <= s.before[e.RunID] {
			return // printed before the run paused
		}
		s.printed[e.RunID] = e.Turn
		fmt.Fprint(s.out, e.Content)
		s.streamed = true
		s.midLine = !strings.HasSuffix(e.Content, "\n")
	case event.ToolCallStart:
		if s.midLine { // what the model said before it called a tool
			fmt.Fprintln(s.out)
			s.midLine = false
		}
		if !s.quiet {
			fmt.Fprintf(s.errw, "  → %s %s\n", e.Tool.Name, oneLine(string(e.Tool.Arguments), 200))
		}
	case event.ToolCallEnd:
		if !s.quiet && e.Tool.Status != "success" && e.Tool.Status != "awaiting_approval" {
			fmt.Fprintf(s.errw, "  ← %s failed: %s\n", e.Tool.Name, oneLine(e.Tool.Error, 200))
		}
	}
}

// end finishes the answer: what was not streamed is printed whole.
func (s *chatStream) end(res *agent.Result) {
	switch {
	case s.streamed:
		if s.midLine {
			fmt.Fprintln(s.out)
		}
	case res != nil && res.Success:
		printAnswer(s.out, res.Result)
	}
}
