package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"text/tabwriter"

	sdkmcp "github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/spf13/cobra"

	"github.com/agentry/agentry/spec"
	"github.com/agentry/agentry/tool/mcp"
)

func newMCPCmd(stdout, stderr io.Writer) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "mcp",
		Short: "Use MCP servers, and serve agents as one",
	}
	cmd.AddCommand(newMCPToolsCmd(stdout), newMCPServeCmd(stdout, stderr))
	return cmd
}

func newMCPServeCmd(stdout, stderr io.Writer) *cobra.Command {
	var (
		f         serveFlags
		transport string
	)
	cmd := &cobra.Command{
		Use:   "serve",
		Short: "Serve the agents of a directory as an MCP server",
		Long: `Serve every agent of the agents directory as a tool of an MCP server (docs/mcp.md): its
input schema from the agent's input_keys or input_schema, its output schema from output_schema,
progress notifications while it runs; the prompt store's templates as prompts. Runs are stored
like any other.

--transport stdio (the default) speaks MCP on standard input and output, for a client that
starts agentry; nothing else is written to standard output. --transport http serves it at
POST /mcp (streamable HTTP, stateless) with the rest of the HTTP API, as agentry serve does,
under the same flags: keys, loopback only without them.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			switch transport {
			case "stdio":
				return serveMCPStdio(cmd.Context(), f, cmd.InOrStdin(), stdout, stderr)
			case "http":
				fmt.Fprintf(stderr, "agentry mcp serve: the MCP endpoint is POST /mcp\n")
				return serve(cmd.Context(), f, stdout, stderr)
			}
			return usageErr(fmt.Errorf("--transport %q: want stdio or http", transport))
		},
	}
	f.flags(cmd)
	cmd.Flags().StringVar(&transport, "transport", "stdio", "stdio or http")
	return cmd
}

// serveMCPStdio speaks MCP on in and out until in ends or a signal comes,
// then lets the runs reach a durable point and stop.
func serveMCPStdio(ctx context.Context, f serveFlags, in io.Reader, out, stderr io.Writer) error {
	srv, _, done, err := newServer(ctx, f, stderr)
	if err != nil {
		return err
	}
	defer done()
	ctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	defer stop()
	err = srv.MCP().Run(ctx, &sdkmcp.IOTransport{Reader: io.NopCloser(in), Writer: nopWriteCloser{out}})
	down, cancel := context.WithTimeout(context.Background(), f.drain)
	defer cancel()
	if cerr := srv.Close(down); cerr != nil && !errors.Is(cerr, context.DeadlineExceeded) {
		return runFailed(cerr)
	}
	if err != nil && ctx.Err() == nil && !errors.Is(err, io.EOF) {
		return runFailed(err)
	}
	return nil
}

type nopWriteCloser struct{ io.Writer }

func (nopWriteCloser) Close() error { return nil }

// mcpToolInfo is one tool as `mcp tools --json` prints it.
type mcpToolInfo struct {
	Server      string          `json:"server"`
	Name        string          `json:"name"`
	Remote      string          `json:"remote_name"`
	Description string          `json:"description,omitempty"`
	Idempotency string          `json:"idempotency"`
	Risk        string          `json:"risk,omitempty"`
	InputSchema json.RawMessage `json:"input_schema"`
}

func newMCPToolsCmd(stdout io.Writer) *cobra.Command {
	var (
		cfg       spec.MCPServer
		server    string
		env, hdrs []string
		asJSON    bool
	)
	cmd := &cobra.Command{
		Use:   "tools SERVER-SPEC",
		Short: "List an MCP server's tools as agents see them",
		Long: `List the tools of an MCP server: the name a model calls each by, the server's
name for it, its idempotency class and risk (from its annotations) and its
description. SERVER-SPEC is one of:

  an http or https URL            a remote server (--transport sse for the legacy transport)
  an agent spec (.json)           the servers of its mcp_servers (--server NAME for one)
  a command and its arguments     a stdio server, after --: agentry mcp tools -- mcp-server-everything stdio

A server that cannot be started or reached is an error naming it (exit 1).`,
		Example: `  agentry mcp tools -- npx -y @modelcontextprotocol/server-everything stdio
  agentry mcp tools http://127.0.0.1:3001/mcp --header "Authorization=Bearer \${env:TOKEN}"
  agentry mcp tools agents/files/v1.json --server fs`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			servers, baseDir, err := mcpServers(args, cfg, server, env, hdrs)
			if err != nil {
				return usageErr(err)
			}
			var list []mcpToolInfo
			for _, s := range servers {
				c, err := mcp.Open(cmd.Context(), s, mcp.Options{BaseDir: baseDir, Version: version()})
				if err != nil {
					return runFailed(err)
				}
				tools, err := c.Tools(cmd.Context())
				c.Close()
				if err != nil {
					return runFailed(err)
				}
				for _, t := range tools {
					info := t.Info()
					list = append(list, mcpToolInfo{Server: s.Name, Name: info.Name, Remote: t.Remote(), Description: info.Description,
						Idempotency: string(info.Idempotency), Risk: string(info.Risk), InputSchema: info.Parameters})
				}
			}
			if asJSON {
				if list == nil {
					list = []mcpToolInfo{}
				}
				if err := writeJSON(stdout, list); err != nil {
					return runFailed(err)
				}
				return nil
			}
			printMCPTools(stdout, list)
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&cfg.Transport, "transport", "", "streamable_http (the default for a URL) or sse")
	f.StringArrayVar(&hdrs, "header", nil, "a header for a remote server, NAME=VALUE (VALUE may hold ${env:VAR}); repeatable")
	f.StringArrayVar(&env, "env", nil, "a variable for a stdio server, NAME=VALUE (VALUE may hold ${env:VAR}); repeatable")
	f.StringVar(&server, "server", "", "with an agent spec: the one server of its mcp_servers to list")
	f.Int64Var(&cfg.ConnectTimeoutMS, "connect-timeout-ms", 0, "how long the server may take to start and answer (default 30000)")
	f.BoolVar(&asJSON, "json", false, "print the tools as JSON, with their input schemas")
	return cmd
}

// mcpServers reads SERVER-SPEC: a URL, an agent spec, or a command.
func mcpServers(args []string, cfg spec.MCPServer, server string, env, hdrs []string) ([]spec.MCPServer, string, error) {
	first := args[0]
	switch {
	case strings.HasPrefix(first, "http://") || strings.HasPrefix(first, "https://"):
		cfg.Name, cfg.URL = "server", first
		if len(args) > 1 {
			return nil, "", fmt.Errorf("a URL takes no arguments (got %q)", args[1:])
		}
	case strings.HasSuffix(first, ".json") && len(args) == 1:
		sp, err := spec.Load(first)
		if err != nil {
			return nil, "", err
		}
		if len(sp.MCPServers) == 0 {
			return nil, "", fmt.Errorf("%s has no mcp_servers", first)
		}
		if server == "" {
			return sp.MCPServers, filepath.Dir(first), nil
		}
		if s := sp.MCPServer(server); s != nil {
			return []spec.MCPServer{*s}, filepath.Dir(first), nil
		}
		return nil, "", fmt.Errorf("%s has no MCP server %q", first, server)
	default:
		cfg.Name, cfg.Command, cfg.Args = "server", first, args[1:]
	}
	if server != "" {
		return nil, "", errors.New("--server is for an agent spec")
	}
	var err error
	if cfg.Env, err = pairs("--env", env); err != nil {
		return nil, "", err
	}
	if cfg.Headers, err = pairs("--header", hdrs); err != nil {
		return nil, "", err
	}
	var s spec.Spec
	s.AgentName, s.Version, s.MCPServers = "mcp", "v1", []spec.MCPServer{cfg}
	if err := s.Check(); err != nil {
		var se *spec.Error
		if errors.As(err, &se) {
			var mine []string
			for _, p := range se.Problems {
				if strings.HasPrefix(p, "mcp_servers") {
					mine = append(mine, strings.TrimPrefix(p, `mcp_servers[0] "server": `))
				}
			}
			if len(mine) > 0 {
				return nil, "", errors.New(strings.Join(mine, "; "))
			}
		}
	}
	wd, _ := os.Getwd()
	return []spec.MCPServer{cfg}, wd, nil
}

func pairs(flag string, vals []string) (map[string]string, error) {
	if len(vals) == 0 {
		return nil, nil
	}
	m := make(map[string]string, len(vals))
	for _, v := range vals {
		k, val, ok := strings.Cut(v, "=")
		if !ok || k == "" {
			return nil, fmt.Errorf("%s %q: want NAME=VALUE", flag, v)
		}
		m[k] = val
	}
	return m, nil
}

func printMCPTools(w io.Writer, list []mcpToolInfo) {
	if len(list) == 0 {
		fmt.Fprintln(w, "no tools")
		return
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "SERVER\tTOOL\tCLASS\tRISK\tDESCRIPTION")
	for _, t := range list {
		name := t.Name
		if t.Remote != t.Name {
			name += " (" + t.Remote + ")"
		}
		desc, _, _ := strings.Cut(t.Description, "\n")
		if r := []rune(desc); len(r) > 80 {
			desc = string(r[:77]) + "..."
		}
		risk := t.Risk
		if risk == "" {
			risk = "-"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", t.Server, name, t.Idempotency, risk, desc)
	}
	tw.Flush()
}
