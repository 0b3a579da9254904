// Package memory is what agents remember across runs: a Memory of
// streams (append-only entries, read back in order and searched), and a
// DB of collections (JSON documents by key, queried and searched). One
// Backend serves both; backends register with Register and are opened by
// data source name with Open, in the manner of database/sql drivers:
//
//	mem:                    in the process (memory/inmem; an agent links it)
//	path/to/agentry.db      SQLite, in the run store's file (store/sqlite)
//	postgres://…            Postgres (store/postgres)
//	redis://…               Redis (memory/redis)
//
// Every entry and document carries who wrote it (run, agent, user) and
// when. Retention (a stream's maximum number of entries, an entry's time
// to live) is stated by the writer and enforced by every backend. An agent
// given a key (agent.WithEncryptionKey) encrypts what reaches a backend.
package memory

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/agentry/agentry/internal/registry"
)

// Entry is one thing a stream remembers.
type Entry struct {
	// ID is assigned by the backend: increasing in the order of appends.
	ID int64 `json:"id"`
	// Stream names the stream ("user:ada"): the unit of reading, search
	// and retention.
	Stream string `json:"stream"`
	// Kind says what the entry is ("input", "final_answer",
	// "tool_result", "note"); free text for the host.
	Kind string `json:"kind,omitempty"`
	// Text is what is remembered.
	Text string `json:"text"`
	// Who wrote it.
	RunID  string `json:"run_id,omitempty"`
	Agent  string `json:"agent,omitempty"`
	UserID string `json:"user_id,omitempty"`
	// Time is when it was appended (set by the backend); Expires, when
	// set, when it is forgotten.
	Time    time.Time `json:"time"`
	Expires time.Time `json:"expires,omitzero"`
}

// Retention is how much a stream keeps, stated by each writer:
// MaxEntries keeps the newest entries only (0: all), TTL forgets an entry
// that long after it was appended (0: never).
type Retention struct {
	MaxEntries int           `json:"max_entries,omitempty"`
	TTL        time.Duration `json:"ttl,omitempty"`
}

// Order is the order entries are read in.
type Order int

// The orders of Read.
const (
	Oldest Order = iota // oldest first
	Newest              // newest first
)

// ReadOptions select the entries of a stream: those appended in
// [Since, Until) (zero: unbounded), in Order, at most Limit (0: all).
// Newest with a Limit reads the last entries.
type ReadOptions struct {
	Limit int
	Order Order
	Since time.Time
	Until time.Time
}

// SearchOptions scope a search: the Stream searched (required: a search
// never crosses streams, which are often one user's each) and the number
// of hits wanted (Limit; default 10).
type SearchOptions struct {
	Stream string
	Limit  int
}

// Hit is an entry a search found, with its score: higher is better;
// scores compare within one search only.
type Hit struct {
	Entry
	Score float64 `json:"score"`
}

// Memory is the client of streams.
type Memory interface {
	// Append adds e to e.Stream, and drops what keep no longer keeps. It
	// returns the entry as stored (ID and Time set).
	Append(ctx context.Context, e Entry, keep Retention) (Entry, error)
	// Read returns the entries of stream that o selects; none is not an
	// error.
	Read(ctx context.Context, stream string, o ReadOptions) ([]Entry, error)
	// Search returns the entries of o.Stream that match query's words,
	// best first.
	Search(ctx context.Context, query string, o SearchOptions) ([]Hit, error)
	// Clear forgets every entry of stream.
	Clear(ctx context.Context, stream string) error
}

// Doc is a document of a collection: a JSON object under a key.
type Doc struct {
	Collection string         `json:"collection"`
	Key        string         `json:"key"`
	Value      map[string]any `json:"value"`
	// Who wrote it last, and when (set by the backend).
	RunID  string    `json:"run_id,omitempty"`
	Agent  string    `json:"agent,omitempty"`
	UserID string    `json:"user_id,omitempty"`
	Time   time.Time `json:"time"`
}

// DocHit is a document a search found, with its score (higher is better).
type DocHit struct {
	Doc
	Score float64 `json:"score"`
}

// Op is a comparison of a query filter.
type Op string

// The comparisons of filters. Range comparisons take a number or a
// string, and match only fields of the same type.
const (
	Eq  Op = "="
	Ne  Op = "!="
	Lt  Op = "<"
	Lte Op = "<="
	Gt  Op = ">"
	Gte Op = ">="
)

// Filter compares a field of the documents' values (a name, or a dotted
// path "address.city") with Value (a string, number or bool).
type Filter struct {
	Field string `json:"field"`
	Op    Op     `json:"op"`
	Value any    `json:"value"`
}

// Query selects documents of a collection: those every filter of Where
// matches, ordered by the field OrderBy (default: the key), descending
// when Desc, at most Limit (default 100).
type Query struct {
	Where   []Filter `json:"where,omitempty"`
	OrderBy string   `json:"order_by,omitempty"`
	Desc    bool     `json:"desc,omitempty"`
	Limit   int      `json:"limit,omitempty"`
}

// DB is the client of collections.
type DB interface {
	// Write stores d.Value under d.Key in d.Collection, replacing what
	// was there; it returns the document as stored (Time set).
	Write(ctx context.Context, d Doc) (Doc, error)
	// Read returns a document; ErrNotFound when there is none.
	Read(ctx context.Context, collection, key string) (Doc, error)
	// Query returns the documents q selects.
	Query(ctx context.Context, collection string, q Query) ([]Doc, error)
	// Search returns the documents of collection whose string values
	// match text's words, best first, at most topK (default 10).
	Search(ctx context.Context, collection, text string, topK int) ([]DocHit, error)
}

// Backend is a store of both: one connection (or file, or process
// memory) that serves streams and collections.
type Backend interface {
	Memory() Memory
	DB() DB
	// Close releases the backend's connections.
	Close() error
}

// Errors a backend returns, matched with errors.Is.
var (
	ErrNotFound = errors.New("memory: not found")
	// ErrInvalid is a request that names no stream, a filter on no
	// field, an unknown operator…: the error's text says which.
	ErrInvalid = errors.New("memory: invalid request")
	// ErrSealed is an entry that cannot be opened: encrypted and no key
	// given, or a wrong key, or changed since it was sealed.
	ErrSealed = errors.New("memory: sealed")
)

// Opener opens a backend from the rest of a data source name.
type Opener func(ctx context.Context, dsn string) (Backend, error)

var backends registry.Registry[Opener]

// Register makes a backend available to Open under name ("mem", "sqlite",
// "postgres", "redis"). It panics when name is taken.
func Register(name string, o Opener) {
	if !backends.Add(name, o) {
		panic("memory: Register called twice for " + name)
	}
}

// Backends returns the names of the registered backends.
func Backends() []string { return backends.Names() }

// backendPackages names the package that registers each backend Open
// knows by its data source name.
var backendPackages = map[string]string{
	"mem":      "memory/inmem",
	"sqlite":   "store/sqlite",
	"postgres": "store/postgres",
	"redis":    "memory/redis",
}

// Open opens the backend dsn names: "mem:" (in the process), a
// postgres:// or redis:// URL, or else a SQLite file path.
func Open(ctx context.Context, dsn string) (Backend, error) {
	name := "sqlite"
	switch {
	case dsn == "":
		return nil, errors.New("memory: empty data source name; give mem:, a SQLite file path, a postgres:// or a redis:// URL")
	case dsn == "mem:" || dsn == "memory:":
		name = "mem"
	case strings.HasPrefix(dsn, "postgres://"), strings.HasPrefix(dsn, "postgresql://"):
		name = "postgres"
	case strings.HasPrefix(dsn, "redis://"), strings.HasPrefix(dsn, "rediss://"), strings.HasPrefix(dsn, "unix://"):
		name = "redis"
	}
	o, ok := backends.Get(name)
	if !ok {
		return nil, fmt.Errorf("memory: no %s backend is registered (import github.com/agentry/agentry/%s; registered: %s)",
			name, backendPackages[name], strings.Join(Backends(), ", "))
	}
	return o(ctx, dsn)
}
