// Package sqltool provides the SQL connector: sql_query, and sql_exec
// when writes are allowed, over database/sql for SQLite (a file path) and
// Postgres (a postgres:// URL). Statements are parameterized (the values
// go in "params", never into the text), one statement a call; sql_query
// runs only statements that read; rows and bytes are capped and each
// statement has a timeout. It is off until a spec configures it
// ("connectors": {"sql": {"dsn": ...}}).
package sqltool

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	_ "github.com/jackc/pgx/v5/stdlib" // "pgx"

	"github.com/agentry/agentry/internal/strictjson"
	"github.com/agentry/agentry/tool"
)

// Options configure the SQL tools.
type Options struct {
	// DSN is a SQLite file path or a postgres:// URL. Required.
	DSN string
	// Write adds sql_exec (off by default).
	Write bool
	// MaxRows caps the rows a query returns (default 100); MaxBytes the
	// size of its result (default 64 KiB).
	MaxRows  int
	MaxBytes int
	// Timeout bounds each statement; default 5s.
	Timeout time.Duration
}

type conn struct {
	db       *sql.DB // sql_exec's, and on Postgres sql_query's too
	ro       *sql.DB // sql_query's on SQLite: opened read-only
	postgres bool
	o        Options
}

type stmtArgs struct {
	SQL    string `json:"sql" jsonschema:"One statement, with placeholders (? for SQLite, $1 for Postgres) for every value."`
	Params []any  `json:"params,omitempty" jsonschema:"The values of the placeholders, in order."`
}

// Rows is what sql_query returns.
type Rows struct {
	Columns   []string         `json:"columns"`
	Rows      []map[string]any `json:"rows"`
	Truncated bool             `json:"truncated,omitempty"`
}

// Tools returns sql_query, and sql_exec when o.Write, over o.DSN. The
// database is opened now, and closed by close.
//
// sql_query runs only statements that read (SELECT, WITH … SELECT,
// VALUES, EXPLAIN; SHOW and TABLE on Postgres), checked on the text as
// the engine reads it. On SQLite it has a connection pool of its own,
// opened read-only with query_only set and an authorizer that refuses
// everything but reading (ATTACH and PRAGMA writes included); on
// Postgres it runs in a READ ONLY transaction. Neither tool runs what
// reaches outside the database (COPY, ATTACH, pg_read_file,
// pg_reload_conf, lo_export, …). A Postgres role can still do what its
// grants allow: give the connector a least-privilege role.
func Tools(o Options) (tools []tool.Tool, close func() error, err error) {
	if o.DSN == "" {
		return nil, nil, errors.New("dsn: required (a SQLite file path or a postgres:// URL)")
	}
	if o.MaxRows <= 0 {
		o.MaxRows = 100
	}
	if o.MaxBytes <= 0 {
		o.MaxBytes = 64 << 10
	}
	if o.Timeout <= 0 {
		o.Timeout = 5 * time.Second
	}
	c := &conn{o: o}
	c.postgres = strings.HasPrefix(o.DSN, "postgres://") || strings.HasPrefix(o.DSN, "postgresql://")
	if err := c.open(); err != nil {
		c.close()
		return nil, nil, fmt.Errorf("dsn: %w", err)
	}
	tools = []tool.Tool{tool.Must(tool.Func("sql_query", "Run one read-only SQL query with parameters; returns its rows.", c.query,
		tool.WithIdempotency(tool.Safe)))}
	if o.Write {
		tools = append(tools, tool.Must(tool.Func("sql_exec", "Run one SQL statement that changes data, with parameters; returns the rows affected.",
			c.exec, tool.WithIdempotency(tool.NonIdempotent))))
	}
	return tools, c.close, nil
}

// open opens the pools the tools use and checks that they connect.
func (c *conn) open() error {
	ctx, cancel := context.WithTimeout(context.Background(), c.o.Timeout)
	defer cancel()
	if c.postgres {
		var err error
		if c.db, err = sql.Open("pgx", c.o.DSN); err != nil {
			return err
		}
		return c.db.PingContext(ctx)
	}
	// The writer first: it creates a missing file, which a read-only
	// connection cannot.
	if c.o.Write {
		c.db = openSQLite(writeDriver, fileURI(c.o.DSN, "_pragma=busy_timeout(5000)"))
		if err := c.db.PingContext(ctx); err != nil {
			return err
		}
	} else if _, err := os.Stat(c.o.DSN); err != nil {
		return fmt.Errorf("sql_query opens the database read-only, and cannot create it (\"write\": true does): %w", err)
	}
	c.ro = openSQLite(readDriver, fileURI(c.o.DSN, "mode=ro&_pragma=query_only(1)&_pragma=busy_timeout(5000)"))
	return c.ro.PingContext(ctx)
}

// fileURI is the file: URI of a SQLite path with query; the path is
// escaped, else a '#' or '?' in it would end it and open another file.
func fileURI(path, query string) string {
	return "file:" + strings.NewReplacer("%", "%25", "?", "%3F", "#", "%23").Replace(path) + "?" + query
}

func (c *conn) close() error {
	var errs []error
	for _, db := range []*sql.DB{c.db, c.ro} {
		if db != nil {
			errs = append(errs, db.Close())
		}
	}
	return errors.Join(errs...)
}

func (c *conn) query(ctx context.Context, a stmtArgs) (*Rows, error) {
	if err := checkStatement(a.SQL, c.postgres, true); err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, c.o.Timeout)
	defer cancel()
	var q interface {
		QueryContext(context.Context, string, ...any) (*sql.Rows, error)
	} = c.ro
	if c.postgres {
		tx, err := c.db.BeginTx(ctx, &sql.TxOptions{ReadOnly: true})
		if err != nil {
			return nil, failure(ctx, err)
		}
		defer tx.Rollback()
		if _, err = tx.ExecContext(ctx, fmt.Sprintf("SET LOCAL statement_timeout = %d", c.o.Timeout.Milliseconds())); err != nil {
			return nil, failure(ctx, err)
		}
		q = tx
	}
	rows, err := q.QueryContext(ctx, a.SQL, a.Params...)
	if err != nil {
		return nil, failure(ctx, err)
	}
	defer rows.Close()
	return c.collect(ctx, rows)
}

// collect reads rows within the caps.
func (c *conn) collect(ctx context.Context, rows *sql.Rows) (*Rows, error) {
	cols, err := rows.Columns()
	if err != nil {
		return nil, failure(ctx, err)
	}
	out := &Rows{Columns: cols, Rows: []map[string]any{}}
	size := 0
	for rows.Next() {
		if len(out.Rows) >= c.o.MaxRows {
			out.Truncated = true
			break
		}
		vals := make([]any, len(cols))
		ptrs := make([]any, len(cols))
		for i := range vals {
			ptrs[i] = &vals[i]
		}
		if err := rows.Scan(ptrs...); err != nil {
			return nil, failure(ctx, err)
		}
		row := make(map[string]any, len(cols))
		for i, col := range cols {
			if b, ok := vals[i].([]byte); ok {
				vals[i] = string(b)
			}
			row[col] = vals[i]
		}
		b, _ := json.Marshal(row)
		if size += len(b); size > c.o.MaxBytes {
			out.Truncated = true
			break
		}
		out.Rows = append(out.Rows, row)
	}
	if err := rows.Err(); err != nil {
		return nil, failure(ctx, err)
	}
	return out, nil
}

func (c *conn) exec(ctx context.Context, a stmtArgs) (map[string]any, error) {
	if err := checkStatement(a.SQL, c.postgres, false); err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, c.o.Timeout)
	defer cancel()
	res, err := c.db.ExecContext(ctx, a.SQL, a.Params...)
	if err != nil {
		return nil, failure(ctx, err)
	}
	n, _ := res.RowsAffected()
	return map[string]any{"rows_affected": n}, nil
}

// failure is what the model is told of a failed statement.
func failure(ctx context.Context, err error) error {
	// Postgres's own statement_timeout (57014) may end the statement just
	// before the context does: both are the statement running out of time.
	var pe *pgconn.PgError
	if ctx.Err() != nil || errors.As(err, &pe) && pe.Code == "57014" {
		return tool.NewErrorDetails("timeout", "the statement ran out of time: "+err.Error(), false)
	}
	msg := err.Error()
	if strings.Contains(msg, "readonly") || strings.Contains(msg, "read-only") || strings.Contains(msg, "query_only") ||
		strings.Contains(msg, "not authorized") {
		return tool.NewErrorDetails("read_only", "sql_query cannot change data: "+msg, true)
	}
	return tool.NewErrorDetails("sql_error", msg, true)
}

// config is the spec's "connectors": {"sql": {...}}.
type config struct {
	DSN       string `json:"dsn"`
	Write     bool   `json:"write,omitempty"`
	MaxRows   int    `json:"max_rows,omitempty"`
	MaxBytes  int    `json:"max_bytes,omitempty"`
	TimeoutMS int64  `json:"timeout_ms,omitempty"`
}

func init() {
	tool.RegisterConnector("sql", func(raw json.RawMessage, baseDir string) ([]tool.Tool, func() error, error) {
		var c config
		if err := strictjson.Decode(raw, &c); err != nil {
			return nil, nil, err
		}
		if c.MaxRows < 0 || c.MaxBytes < 0 || c.TimeoutMS < 0 {
			return nil, nil, errors.New("max_rows, max_bytes and timeout_ms must not be negative")
		}
		dsn := c.DSN
		if dsn != "" && !strings.Contains(dsn, "://") && !filepath.IsAbs(dsn) {
			dsn = filepath.Join(baseDir, dsn)
		}
		// The database stays open until the agent is closed.
		return Tools(Options{DSN: dsn, Write: c.Write, MaxRows: c.MaxRows, MaxBytes: c.MaxBytes,
			Timeout: time.Duration(c.TimeoutMS) * time.Millisecond})
	})
}
