package tool

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"strings"

	"github.com/agentry/agentry/internal/registry"
)

// A Source gives agents the tools of one scheme of a spec's tools
// entries: "mcp:fs/read_file" (package tool/mcp, a tool of an MCP
// server), "a2a:https://…" (package tool/a2a, a remote A2A agent).
// Packages register theirs with RegisterSource, as connectors and
// providers register themselves; an agent opens, when it is built, each
// source its spec's entries name, and a spec that names a source no
// linked package registered is an error naming the import.
type Source interface {
	// Open opens the tools req's entries name. Its error says what went
	// wrong for each entry (errors.Join of one error an entry or a
	// server), the sets it returns hold what did open.
	Open(ctx context.Context, req SourceRequest) ([]Set, error)
}

// SourceRequest is what an agent asks of a source.
type SourceRequest struct {
	// Entries are the spec's tools entries of the source's scheme, whole
	// ("mcp:fs/read_file"), in the spec's order, and Index their places
	// in its tools list, for messages ("tools[3]").
	Entries []string
	Index   []int
	// Spec is the agent's spec as JSON: a source reads its own fields of
	// it (mcp_servers, a2a_agents).
	Spec json.RawMessage
	// BaseDir is the spec's directory, for relative paths.
	BaseDir string
	// Logger logs what the source does in the background.
	Logger *slog.Logger
}

// A Set is tools a source gives an agent, which may change while the
// agent lives (an MCP server's tools/list_changed): the agent asks again
// when Changes has grown since it last asked. Close releases what the
// set holds open (a server's process).
type Set interface {
	// Name names the set in logs and messages (an MCP server's name).
	Name() string
	// Tools are the set's tools now, as the entries take them.
	Tools(ctx context.Context) ([]Tool, error)
	// Changes grows when the tools may have changed; 0 for a set whose
	// tools never do.
	Changes() uint64
	Close() error
}

var sources registry.Registry[Source]

// RegisterSource makes a source available to specs under scheme ("mcp"
// for entries "mcp:…"). It panics when scheme is taken, as
// database/sql does.
func RegisterSource(scheme string, s Source) {
	if !sources.Add(scheme, s) {
		panic("tool: RegisterSource called twice for " + scheme)
	}
}

// sourcePackages are the packages of the sources agentry has, by
// scheme: what a program imports to link one.
var sourcePackages = map[string]string{"mcp": "tool/mcp", "a2a": "tool/a2a"}

// SourceOf is the source registered under scheme, or an error naming
// the package to import (for a scheme agentry has none of, a forgotten
// import of the program's own).
func SourceOf(scheme string) (Source, error) {
	if s, ok := sources.Get(scheme); ok {
		return s, nil
	}
	linked := strings.Join(append([]string{"agent"}, sources.Names()...), ", ")
	if pkg, ok := sourcePackages[scheme]; ok {
		return nil, fmt.Errorf("no tool source %q is linked: import _ \"github.com/agentry/agentry/%s\" (linked: %s)", scheme, pkg, linked)
	}
	return nil, fmt.Errorf("no tool source %q is registered (a forgotten import? tool.RegisterSource registers one; linked: %s)", scheme, linked)
}

// SchemeOf is the scheme of a tools entry that names a source
// ("mcp:fs/read_file" is "mcp"), or "" for a tool named plainly.
func SchemeOf(entry string) string {
	scheme, _, ok := strings.Cut(entry, ":")
	if !ok || scheme == "" || strings.IndexFunc(scheme, func(r rune) bool { return (r < 'a' || r > 'z') && (r < '0' || r > '9') }) >= 0 {
		return ""
	}
	return scheme
}
