// Package sqltool provides the SQL connector: sql_query, and sql_exec
// when writes are allowed, over database/sql for SQLite (a file path) and
// Postgres (a postgres:// URL). Statements are parameterized (the values
// go in "params", never into the text), one statement a call; sql_query
// runs read-only; rows and bytes are capped and each statement has a
// timeout. It is off until a spec configures it ("connectors":
// {"sql": {"dsn": ...}}).
package sqltool

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"time"

	_ "github.com/jackc/pgx/v5/stdlib" // "pgx"
	_ "modernc.org/sqlite"             // "sqlite"

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
	db       *sql.DB
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
	driver, dsn := "sqlite", "file:"+o.DSN+"?_pragma=busy_timeout(5000)"
	if strings.HasPrefix(o.DSN, "postgres://") || strings.HasPrefix(o.DSN, "postgresql://") {
		driver, dsn, c.postgres = "pgx", o.DSN, true
	}
	if c.db, err = sql.Open(driver, dsn); err != nil {
		return nil, nil, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), o.Timeout)
	defer cancel()
	if err := c.db.PingContext(ctx); err != nil {
		c.db.Close()
		return nil, nil, fmt.Errorf("dsn: %w", err)
	}
	tools = []tool.Tool{tool.Must(tool.Func("sql_query", "Run one read-only SQL query with parameters; returns its rows.", c.query,
		tool.WithIdempotency(tool.Safe)))}
	if o.Write {
		tools = append(tools, tool.Must(tool.Func("sql_exec", "Run one SQL statement that changes data, with parameters; returns the rows affected.",
			c.exec, tool.WithIdempotency(tool.NonIdempotent))))
	}
	return tools, c.db.Close, nil
}

// check refuses what is not one statement.
func check(q string) error {
	q = strings.TrimSpace(q)
	if q == "" {
		return tool.NewErrorDetails("invalid_arguments", "sql is empty", true)
	}
	if i := strings.Index(q, ";"); i >= 0 && strings.TrimSpace(q[i+1:]) != "" {
		return tool.NewErrorDetails("invalid_arguments", "one statement a call: the sql holds more than one (;)", true)
	}
	return nil
}

func (c *conn) query(ctx context.Context, a stmtArgs) (*Rows, error) {
	if err := check(a.SQL); err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, c.o.Timeout)
	defer cancel()
	cx, err := c.db.Conn(ctx)
	if err != nil {
		return nil, failure(ctx, err)
	}
	defer cx.Close()
	tx, err := c.readOnly(ctx, cx)
	if err != nil {
		return nil, failure(ctx, err)
	}
	defer c.endReadOnly(cx, tx)
	rows, err := tx.QueryContext(ctx, a.SQL, a.Params...)
	if err != nil {
		return nil, failure(ctx, err)
	}
	defer rows.Close()
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

// readOnly begins a transaction that cannot write: Postgres's READ ONLY,
// SQLite's query_only on the connection.
func (c *conn) readOnly(ctx context.Context, cx *sql.Conn) (*sql.Tx, error) {
	if c.postgres {
		tx, err := cx.BeginTx(ctx, &sql.TxOptions{ReadOnly: true})
		if err == nil {
			_, err = tx.ExecContext(ctx, fmt.Sprintf("SET LOCAL statement_timeout = %d", c.o.Timeout.Milliseconds()))
		}
		return tx, err
	}
	if _, err := cx.ExecContext(ctx, "PRAGMA query_only = ON"); err != nil {
		return nil, err
	}
	return cx.BeginTx(ctx, nil)
}

func (c *conn) endReadOnly(cx *sql.Conn, tx *sql.Tx) {
	tx.Rollback()
	if !c.postgres {
		cx.ExecContext(context.Background(), "PRAGMA query_only = OFF")
	}
}

func (c *conn) exec(ctx context.Context, a stmtArgs) (map[string]any, error) {
	if err := check(a.SQL); err != nil {
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
	if ctx.Err() != nil {
		return tool.NewErrorDetails("timeout", "the statement ran out of time: "+err.Error(), false)
	}
	msg := err.Error()
	if strings.Contains(msg, "readonly") || strings.Contains(msg, "read-only") || strings.Contains(msg, "query_only") {
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
