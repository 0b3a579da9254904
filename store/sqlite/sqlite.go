// Package sqlite is the embedded run store: one SQLite file through the
// pure-Go modernc.org/sqlite driver (no cgo), in WAL mode, holding runs,
// memory and prompts. Importing it registers the "sqlite" backend with
// store.Open, which takes any data source name that is not a postgres://
// URL as a file path, and with memory.Open, which takes a file path.
//
// Commits are synchronous=NORMAL in WAL mode: a committed write survives
// the process being killed; a power loss may lose the last commits.
package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io/fs"
	"net/url"
	"os"
	"path/filepath"
	"runtime"
	"strings"

	_ "modernc.org/sqlite" // the database/sql driver "sqlite"

	"github.com/agentry/agentry/internal/ids"
	"github.com/agentry/agentry/memory"
	"github.com/agentry/agentry/store"
	"github.com/agentry/agentry/store/sqlstore"
)

// SQLite's rowid is the sequence when declared exactly so.
var dialect = sqlstore.Dialect{Name: "sqlite", SeqKey: "INTEGER PRIMARY KEY", Text: sqlstore.SQLiteText(), SerialWrites: true,
	AfterDelete: "PRAGMA wal_checkpoint(TRUNCATE)"}

// uriPath escapes what would end a path in a file: URI.
var uriPath = strings.NewReplacer("%", "%25", "?", "%3F", "#", "%23")

// Open opens (creating it and its directory when missing) the SQLite
// store at path and brings its schema up to date. The *sqlstore.DB it
// returns is the run store (a store.Store), a memory backend (a
// memory.Backend) and a prompt store (its Prompts method) over that
// file; Close it when done. ":memory:" opens a database in the process,
// its own, kept until Close: nothing is written to disk, and all of it
// is gone at Close (for tests and demos).
func Open(ctx context.Context, path string) (*sqlstore.DB, error) {
	if path == "" {
		return nil, fmt.Errorf("store (sqlite): empty path")
	}
	if path != ":memory:" {
		if err := ownerOnly(path); err != nil {
			return nil, fmt.Errorf("store (sqlite) %s: %w", path, err)
		}
	}
	// Writers take the database lock when their transaction begins
	// (_txlock=immediate), so two writers wait for each other instead of
	// failing on a lock upgrade; busy_timeout is how long they wait.
	q := url.Values{}
	q.Add("_pragma", "journal_mode(WAL)")
	q.Add("_pragma", "synchronous(NORMAL)")
	q.Add("_pragma", "busy_timeout(10000)")
	q.Add("_pragma", "foreign_keys(1)")
	// What is deleted is overwritten (a deleted conversation leaves no
	// text in free pages).
	q.Add("_pragma", "secure_delete(1)")
	q.Set("_txlock", "immediate")
	// The path in a file: URI is escaped, else a '#' or '?' in it would
	// end it there, and another file would be opened.
	dsn := "file:" + uriPath.Replace(path) + "?" + q.Encode()
	if path == ":memory:" {
		// SQLite's memdb: one database in the process that every
		// connection of the pool shares (a plain :memory: is one database
		// per connection), locked as a file is (its journal in memory:
		// WAL needs a file). Named uniquely, it is this store's alone.
		dsn = "file:/agentry-" + ids.New("mem") + "?vfs=memdb&" + q.Encode()
	}
	db, err := sql.Open("sqlite", dsn)
	if err != nil {
		return nil, fmt.Errorf("store (sqlite) %s: %w", path, err)
	}
	// A bounded pool, kept open: a connection is costly to open (SQLite
	// reads the schema, the pure-Go library sets up its own memory), and
	// the pool's default keeps two idle, so that a load of many readers
	// opened and closed connections all the time. SQLite writes one at a
	// time anyway; readers beyond the pool wait for a connection.
	conns := max(8, 4*runtime.GOMAXPROCS(0))
	db.SetMaxOpenConns(conns)
	db.SetMaxIdleConns(conns)
	var keep *sql.Conn
	if path == ":memory:" {
		// memdb frees a database with its last connection: one is held
		// until Close, whatever the pool closes.
		if keep, err = db.Conn(ctx); err != nil {
			db.Close()
			return nil, fmt.Errorf("store (sqlite) %s: %w", path, err)
		}
	}
	if err := db.PingContext(ctx); err != nil {
		closeKept(keep)
		db.Close()
		return nil, fmt.Errorf("store (sqlite) %s: %w", path, err)
	}
	s, err := sqlstore.Open(ctx, db, dialect) // closes db when it fails
	if err != nil {
		closeKept(keep)
		return nil, fmt.Errorf("%w (file %s)", err, path)
	}
	if keep != nil {
		s.AtClose(keep.Close)
	} else {
		tightenSidecars(path)
	}
	return s, nil
}

// closeKept closes the connection that keeps a memdb database, if any.
func closeKept(keep *sql.Conn) {
	if keep != nil {
		keep.Close()
	}
}

// tightenSidecars gives the -wal and -shm files of an owner-only store
// its mode, where an older release left them with the umask's. A store
// its user made readable to others (0640, say) is theirs to decide: its
// sidecars are left alone, and so is a file this process may not chmod.
func tightenSidecars(path string) {
	fi, err := os.Stat(path)
	if err != nil || fi.Mode().Perm()&0o077 != 0 {
		return
	}
	for _, sfx := range []string{"-wal", "-shm"} {
		os.Chmod(path+sfx, 0o600) // best effort: a sidecar of another owner stays as it is
	}
}

// ownerOnly makes the database file the owner's only (runs hold prompts
// and tool results) before SQLite opens it: SQLite creates its -wal and
// -shm files with the mode of the database file, and every record
// passes through the WAL.
func ownerOnly(path string) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return err
	}
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o600)
	switch {
	case errors.Is(err, fs.ErrExist):
		return nil // a store that exists keeps the mode its user gave it
	case err != nil:
		return err
	}
	f.Close()
	return os.Chmod(path, 0o600) // whatever the umask
}

func init() {
	store.Register("sqlite", func(ctx context.Context, dsn string) (store.Store, error) { return Open(ctx, dsn) })
	memory.Register("sqlite", func(ctx context.Context, dsn string) (memory.Backend, error) { return Open(ctx, dsn) })
}
