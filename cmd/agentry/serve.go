package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/agentry/agentry/agent"
	"github.com/agentry/agentry/pipeline"
	"github.com/agentry/agentry/policy"
	"github.com/agentry/agentry/server"
	"github.com/agentry/agentry/spec"
)

// serveFlags are the flags of agentry serve.
type serveFlags struct {
	addr, agents, pipelines, db, prompts, keys string
	logLevel, logFormat                        string
	maxRuns, maxStreams                        int
	drain                                      time.Duration
	allowPrivate, resumeInterrupted            bool
	a2aAgent, baseURL                          string
	roles                                      []string // --model-role
	create                                     []string // --create WHAT=ROLE[,ROLE]
	models                                     []string
	temporal                                   temporalFlags
}

func newServeCmd(stdout, stderr io.Writer) *cobra.Command {
	var f serveFlags
	cmd := &cobra.Command{
		Use:   "serve",
		Short: "Serve the agents of a directory over HTTP",
		Long: `Serve every agent of the agents directory over HTTP (docs/server.md): runs created by
name (and pipelines by name, with --pipelines), read, listed, aborted, and their events streamed live (server-sent events, resumable
with Last-Event-ID). Without --auth-keys the server listens on loopback only.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return serve(cmd.Context(), f, stdout, stderr)
		},
	}
	f.flags(cmd)
	return cmd
}

// flags defines the flags of serve on cmd.
func (f *serveFlags) flags(cmd *cobra.Command) {
	fl := cmd.Flags()
	fl.StringVar(&f.addr, "addr", "127.0.0.1:8080", "the address to listen on")
	fl.StringVar(&f.agents, "agents", "agents", "the agents directory to serve")
	fl.StringVar(&f.pipelines, "pipelines", "", "a directory of pipeline definitions (*.json) to serve too")
	fl.StringVar(&f.keys, "auth-keys", "", `a JSON file of bearer keys: [{"name", "sha256", "role", "all_users"}] (roles viewer, runner, admin; hashes from "agentry hash-key"; a key reaches its own name's runs, or every user's with "all_users": true)`)
	fl.IntVar(&f.maxRuns, "max-runs", 64, "the most runs going at once (429 beyond)")
	fl.IntVar(&f.maxStreams, "max-streams", 1024, "the most event streams open at once (429 beyond)")
	fl.StringVar(&f.logLevel, "log-level", os.Getenv("AGENTRY_LOG_LEVEL"), "log requests and runs on stderr at this level: debug, info, warn, error, off (env AGENTRY_LOG_LEVEL; off by default)")
	fl.StringVar(&f.logFormat, "log-format", os.Getenv("AGENTRY_LOG_FORMAT"), "log records as json or text (env AGENTRY_LOG_FORMAT; implies --log-level info)")
	fl.DurationVar(&f.drain, "shutdown-timeout", 30*time.Second, "at SIGTERM, how long runs may go on before they are interrupted (resumable)")
	fl.BoolVar(&f.allowPrivate, "allow-private-network", false, "let the HTTP tools reach private and loopback addresses")
	fl.StringVar(&f.a2aAgent, "a2a-agent", "", "the agent (NAME or NAME@VERSION) of the well-known A2A card and POST /a2a (default: the only agent served); every agent is at /a2a/NAME")
	fl.StringVar(&f.baseURL, "base-url", "", "the URL clients reach the server at (https://host[/prefix]), for the A2A cards' endpoints (default: the URL a card is asked for)")
	fl.StringArrayVar(&f.create, "create", nil, `who may create what through the server, WHAT=ROLE[,ROLE]: WHAT a glob of agent:NAME, tool:NAME, connector:KIND, mcp:COMMAND (or mcp:HOST), a2a:HOST or memory:BACKEND, ROLE viewer, runner, admin or * (repeatable; what none names stays an admin's, so by default only an admin runs an inline spec)`)
	fl.StringArrayVar(&f.roles, "model-role", nil, "the model of the served pipelines' stages of a role, ROLE=PROVIDER:MODEL, over their model_roles (repeatable)")
	fl.StringSliceVar(&f.models, "models", nil, `models a request's "model" may name besides each agent's own model_name and fallback_models, and the only ones an inline spec may name (comma-separated, or the flag again)`)
	fl.BoolVar(&f.resumeInterrupted, "resume-interrupted", false, "at start, resume the runs a stopped or crashed server left interrupted")
	f.temporal.flags(cmd, false)
	fl.Lookup("temporal").Usage = "start agent runs on the Temporal server at HOST:PORT, for agentry worker to run (env AGENTRY_TEMPORAL)"

	dbFlag(cmd, &f.db)
	promptsFlag(cmd, &f.prompts)
}

// serve runs the server until SIGINT or SIGTERM, then lets the runs it
// drives reach a durable point and stop.
func serve(ctx context.Context, f serveFlags, stdout, stderr io.Writer) error {
	srv, n, done, err := newServer(ctx, f, stderr)
	if err != nil {
		return err
	}
	defer done()
	return listen(ctx, f, srv, n, stdout, stderr)
}

// newServer builds the server f describes, with n agents; done closes
// what it opened.
func newServer(ctx context.Context, f serveFlags, stderr io.Writer) (srv *server.Server, n int, done func(), err error) {
	var closers []func()
	closeAll := func() {
		for i := len(closers) - 1; i >= 0; i-- {
			closers[i]()
		}
	}
	defer func() {
		if err != nil {
			closeAll()
		}
	}()
	keys, err := serveKeys(f)
	if err != nil {
		return nil, 0, nil, usageErr(err)
	}
	create, err := creationFlags(f.create)
	if err != nil {
		return nil, 0, nil, usageErr(err)
	}
	key, err := encryptionKey() // seals memory and run logs; the server opens them
	if err != nil {
		return nil, 0, nil, usageErr(err)
	}
	st, err := openStore(ctx, f.db)
	if err != nil {
		return nil, 0, nil, usageErr(err)
	}
	closers = append(closers, func() { st.Close() })
	so, err := storeOptions(st, f.prompts)
	if err != nil {
		return nil, 0, nil, usageErr(err)
	}
	tel, err := openTelemetry(ctx)
	if err != nil {
		return nil, 0, nil, usageErr(err)
	}
	closers = append(closers, func() {
		if err := tel.shutdown(); err != nil {
			fmt.Fprintf(stderr, "agentry serve: OpenTelemetry export: %v\n", err)
		}
	})
	opts, logger, err := serveOptions(f, so, tel, stderr)
	if err != nil {
		return nil, 0, nil, usageErr(err)
	}
	reg, err := servedAgents(f.agents, opts)
	if err != nil {
		return nil, 0, nil, usageErr(err)
	}
	closers = append(closers, func() { reg.Close() })
	pipes, err := loadPipelines(f, reg, opts, tel, key)
	if err != nil {
		return nil, 0, nil, usageErr(err)
	}
	closers = append(closers, func() {
		for _, p := range pipes {
			p.Close()
		}
	})
	var remote server.Remote
	if f.temporal.address != "" {
		c, err := f.temporal.dial(ctx, logger, st, tel)
		if err != nil {
			return nil, 0, nil, runFailed(err)
		}
		closers = append(closers, c.Close)
		remote = temporalRemote{c: c, t: f.temporal}
	}
	srv, err = server.New(server.Config{Store: st, Agents: reg, Pipelines: pipes, AgentOptions: opts, Models: f.models, Keys: keys, Create: create, MaxRuns: f.maxRuns, MaxStreams: f.maxStreams,
		EncryptionKey: key, Logger: logger, Prompts: userPrompts(st, f.prompts), Version: version(), A2AAgent: f.a2aAgent, BaseURL: f.baseURL,
		Remote: remote})
	if err != nil {
		return nil, 0, nil, runFailed(err)
	}
	if f.resumeInterrupted {
		resumeAtStart(ctx, srv, stderr)
	}
	return srv, len(reg.Agents()), closeAll, nil
}

// serveOptions are the options of the served agents: the built-in tools,
// the store's, telemetry's, and the logger of --log-level, which it
// returns too.
func serveOptions(f serveFlags, so []agent.Option, tel *telemetry, stderr io.Writer) ([]agent.Option, *slog.Logger, error) {
	opts := append([]agent.Option{agent.WithTools(builtinTools(f.allowPrivate))}, so...)
	opts = append(opts, tel.agentOptions()...)
	logger, err := newLogger(f.logLevel, f.logFormat, stderr)
	if err != nil {
		return nil, nil, err
	}
	if logger != nil {
		opts = append(opts, agent.WithLogger(logger))
	}
	return opts, logger, nil
}

// resumeAtStart resumes the runs a stopped or crashed server left
// interrupted (--resume-interrupted), saying how many.
func resumeAtStart(ctx context.Context, srv *server.Server, stderr io.Writer) {
	ids, err := srv.ResumeInterrupted(ctx)
	if len(ids) > 0 {
		fmt.Fprintf(stderr, "agentry serve: resuming %d interrupted runs\n", len(ids))
	}
	if err != nil {
		fmt.Fprintf(stderr, "agentry serve: %v\n", err)
	}
}

// serveKeys are the keys of --auth-keys; without them the server must
// listen on loopback.
func serveKeys(f serveFlags) ([]server.Key, error) {
	if f.keys != "" {
		return server.LoadKeys(f.keys)
	}
	if !loopback(f.addr) {
		return nil, fmt.Errorf("--addr %s is not a loopback address: a server without --auth-keys listens on loopback only", f.addr)
	}
	return nil, nil
}

// listen serves srv over HTTP until SIGINT or SIGTERM, then lets the runs
// it drives reach a durable point and stop.
func listen(ctx context.Context, f serveFlags, srv *server.Server, n int, stdout, stderr io.Writer) error {
	ln, err := net.Listen("tcp", f.addr)
	if err != nil {
		return usageErr(fmt.Errorf("--addr: %w", err))
	}
	// Every phase of a connection is bounded but the response's writing:
	// an event stream stays open as long as its run goes.
	hs := &http.Server{Handler: srv, ReadHeaderTimeout: 10 * time.Second, ReadTimeout: time.Minute, IdleTimeout: 2 * time.Minute}
	fmt.Fprintf(stdout, "agentry serve: listening on http://%s (%d agents)\n", ln.Addr(), n)
	ctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	defer stop()
	errc := make(chan error, 1)
	go func() { errc <- hs.Serve(ln) }()
	select {
	case err := <-errc:
		return runFailed(err)
	case <-ctx.Done():
	}
	fmt.Fprintln(stderr, "agentry serve: stopping")
	down, cancel := context.WithTimeout(context.Background(), f.drain)
	defer cancel()
	// Both at once: the listener closes at once, and the event streams
	// end as their runs do.
	shut := make(chan error, 1)
	go func() { shut <- hs.Shutdown(down) }()
	err = srv.Close(down)
	<-shut
	if err != nil && !errors.Is(err, context.DeadlineExceeded) {
		return runFailed(err)
	}
	return nil
}

// loadPipelines compiles every pipeline definition of --pipelines: a
// stage names a served agent first, then one of the pipeline's own
// agents_dir.
func loadPipelines(f serveFlags, reg *agent.Registry, opts []agent.Option, tel *telemetry, key []byte) ([]*pipeline.Pipeline, error) {
	if f.pipelines == "" {
		return nil, nil
	}
	paths, err := filepath.Glob(filepath.Join(f.pipelines, "*.json"))
	if err == nil && len(paths) == 0 {
		err = errors.New("no *.json pipeline definitions")
	}
	if err != nil {
		return nil, fmt.Errorf("--pipelines %s: %w", f.pipelines, err)
	}
	roles, err := modelRoles(f.roles)
	if err != nil {
		return nil, err
	}
	var out []*pipeline.Pipeline
	for _, path := range paths {
		popts := append([]pipeline.Option{pipeline.WithTools(builtinTools(f.allowPrivate)), pipeline.WithRegistry(reg),
			pipeline.WithAgentOptions(opts...)}, tel.pipelineOptions()...)
		if key != nil {
			popts = append(popts, pipeline.WithEncryptionKey(key))
		}
		if roles != nil {
			popts = append(popts, pipeline.WithModelRoles(roles))
		}
		p, err := pipeline.FromFile(path, popts...)
		if err != nil {
			for _, q := range out {
				q.Close()
			}
			return nil, fmt.Errorf("--pipelines: %w", err)
		}
		out = append(out, p)
	}
	return out, nil
}

// loopback says addr's host is a loopback address (or localhost).
func loopback(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

func newHashKeyCmd(stdout io.Writer) *cobra.Command {
	return &cobra.Command{
		Use:   "hash-key [KEY]",
		Short: "Print the SHA-256 an --auth-keys file keeps of a bearer key",
		Long: `Print the SHA-256 an --auth-keys file keeps of a bearer key, read from standard input
(its first line), so that the key does not show in the process list or the shell's history;
or given as the argument.`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			key := ""
			if len(args) == 1 {
				key = args[0]
			} else {
				line, err := bufio.NewReader(cmd.InOrStdin()).ReadString('\n')
				if err != nil && !errors.Is(err, io.EOF) {
					return usageErr(err)
				}
				key = strings.TrimRight(line, "\r\n")
			}
			if key == "" {
				return usageErr(errors.New("no key: give it on standard input (or as the argument)"))
			}
			fmt.Fprintln(stdout, server.HashKey(key))
			return nil
		},
	}
}

// servedAgents are the agents of dir, each ready to run: one whose
// provider lacks its key fails the server now, not at its first request.
func servedAgents(dir string, opts []agent.Option) (*agent.Registry, error) {
	reg, err := agent.LoadRegistry(spec.Dir{Path: dir}, opts...)
	if err != nil {
		return nil, fmt.Errorf("--agents %s: %w", dir, err)
	}
	for _, a := range reg.Agents() {
		if err := a.Ready(); err != nil {
			reg.Close()
			return nil, err
		}
	}
	return reg, nil
}

// creationFlags reads --create WHAT=ROLE[,ROLE] flags; none: nil, the
// server's own rule (only an admin creates).
func creationFlags(flags []string) (policy.Creation, error) {
	if len(flags) == 0 {
		return nil, nil
	}
	rules := policy.Creation{}
	for _, kv := range flags {
		what, roles, ok := strings.Cut(kv, "=")
		if !ok || what == "" || roles == "" {
			return nil, fmt.Errorf("--create %q: want WHAT=ROLE[,ROLE] (agent:*=runner)", kv)
		}
		rules[what] = append(rules[what], strings.Split(roles, ",")...)
	}
	return rules, nil
}
