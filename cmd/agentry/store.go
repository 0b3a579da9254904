package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"

	"github.com/agentry/agentry/agent"
	"github.com/agentry/agentry/memory"
	_ "github.com/agentry/agentry/memory/redis" // memory.backend redis://...
	"github.com/agentry/agentry/prompt"
	"github.com/agentry/agentry/react"
	"github.com/agentry/agentry/runlog"
	"github.com/agentry/agentry/store"
	_ "github.com/agentry/agentry/store/postgres" // --db postgres://...
	_ "github.com/agentry/agentry/store/sqlite"   // --db PATH, the default
)

// storeOptions give agents the run store's database as their memory's
// default backend (memory lives in the same file or Postgres schema),
// sealed with the key AGENTRY_ENCRYPTION_KEY holds, and their prompt
// store: --prompts DIR, the run store's, the built-in ReAct templates,
// in that order. st may be nil (--no-store).
func storeOptions(st store.Store, promptsDir string) ([]agent.Option, error) {
	var opts []agent.Option
	if b, ok := st.(memory.Backend); ok {
		opts = append(opts, agent.WithMemory(b))
	}
	key, err := encryptionKey()
	if err != nil {
		return nil, err
	}
	if key != nil {
		opts = append(opts, agent.WithEncryptionKey(key))
	}
	return append(opts, agent.WithPrompts(promptStore(st, promptsDir))), nil
}

// encryptionKey is the key AGENTRY_ENCRYPTION_KEY holds, nil without one:
// it seals memory and the run logs.
func encryptionKey() ([]byte, error) {
	s := os.Getenv(memory.KeyEnv)
	if s == "" {
		return nil, nil
	}
	key, err := memory.ParseKey(s)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", memory.KeyEnv, err)
	}
	return key, nil
}

// logOptions open sealed run logs with the binary's key.
func logOptions() ([]runlog.Option, error) {
	key, err := encryptionKey()
	if key == nil || err != nil {
		return nil, err
	}
	s, err := runlog.NewSealer(key)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", memory.KeyEnv, err)
	}
	return []runlog.Option{runlog.Sealed(s)}, nil
}

// openReading opens the run store at dsn with the options that read its
// sealed logs; a problem with either is bad usage.
func openReading(ctx context.Context, dsn string) (store.Store, []runlog.Option, error) {
	lo, err := logOptions()
	if err != nil {
		return nil, nil, usageErr(err)
	}
	st, err := openStore(ctx, dsn)
	if err != nil {
		return nil, nil, usageErr(err)
	}
	return st, lo, nil
}

// promptStore is where the binary finds templates: --prompts DIR first,
// then the run store, then the built-in ReAct templates. Puts go to the
// first of them that is writable; a directory is not.
func promptStore(st store.Store, dir string) prompt.Store {
	return prompt.Layered(userPrompts(st, dir), prompt.Fixed(react.Templates()...))
}

// userPrompts are the templates of --prompts and the run store, without
// the built-in ReAct ones: what the MCP server offers as prompts.
func userPrompts(st store.Store, dir string) prompt.Store {
	var layers []prompt.Store
	if dir != "" {
		layers = append(layers, prompt.Dir(dir))
	}
	if ps, ok := st.(interface{ Prompts() prompt.Store }); ok {
		layers = append(layers, ps.Prompts())
	}
	return prompt.Layered(layers...)
}

// promptsFlag adds --prompts.
func promptsFlag(cmd *cobra.Command, dir *string) {
	cmd.Flags().StringVar(dir, "prompts", os.Getenv("AGENTRY_PROMPTS"),
		"a directory of prompt templates, {id}/{version}.json, read before the run store's (env AGENTRY_PROMPTS)")
}

// dbFlag adds --db to a command that reads or writes the run store.
func dbFlag(cmd *cobra.Command, dsn *string) {
	cmd.Flags().StringVar(dsn, "db", "", "the run store: a SQLite file or a postgres:// URL "+
		"(env AGENTRY_DB; default $XDG_DATA_HOME/agentry/agentry.db)")
}

// defaultDB is where runs are stored when neither --db nor AGENTRY_DB
// says: agentry.db in $XDG_DATA_HOME/agentry (~/.local/share/agentry).
func defaultDB() string {
	if v := os.Getenv("AGENTRY_DB"); v != "" {
		return v
	}
	dir := os.Getenv("XDG_DATA_HOME")
	if dir == "" {
		home, err := os.UserHomeDir()
		if err != nil {
			home = "."
		}
		dir = filepath.Join(home, ".local", "share")
	}
	return filepath.Join(dir, "agentry", "agentry.db")
}

// openStore opens the store --db names (or the default one).
func openStore(ctx context.Context, dsn string) (store.Store, error) {
	if dsn == "" {
		dsn = defaultDB()
	}
	st, err := store.Open(ctx, dsn)
	if err != nil {
		return nil, fmt.Errorf("--db %s: %w", redactDSN(dsn), err)
	}
	return st, nil
}

// redactDSN hides the password of a postgres URL in messages.
func redactDSN(dsn string) string {
	scheme, rest, ok := strings.Cut(dsn, "://")
	if !ok {
		return dsn
	}
	cred, host, ok := strings.Cut(rest, "@")
	if !ok {
		return dsn
	}
	if user, _, hasPass := strings.Cut(cred, ":"); hasPass {
		return scheme + "://" + user + ":***@" + host
	}
	return dsn
}
