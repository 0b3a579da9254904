package sqltool

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"

	"modernc.org/sqlite"
)

// SQLite connections come from drivers of this package's own, whose
// connection hook installs an authorizer: SQLite asks it about every
// operation of a statement as it compiles it, whatever the text looks
// like.
var (
	readDriver  = authorizing(authorizer(false))
	writeDriver = authorizing(authorizer(true))
)

// introspection are the pragmas that only describe the schema; they are
// also what the pragma_table_info(…) table functions ask for.
var introspection = wordSet("table_info table_xinfo table_list index_list index_info index_xinfo foreign_key_list")

// authorizer allows reading tables, the functions but the denied ones
// and the schema pragmas; with write, it allows changing tables too,
// and still no ATTACH, DETACH, other pragma or denied function. Reading
// alone, it also refuses transaction control.
func authorizer(write bool) sqlite.AuthorizerFn {
	return func(action sqlite.AuthorizerActionCode, arg1, arg2, _, _ string) sqlite.AuthorizerReturnCode {
		switch action {
		case sqlite.AuthSelect, sqlite.AuthRead, sqlite.AuthRecursive:
			return sqlite.AuthorizerOK
		case sqlite.AuthFunction:
			return allowIf(!deniedFunc(arg2))
		case sqlite.AuthPragma:
			return allowIf(introspection[arg1])
		case sqlite.AuthAttach, sqlite.AuthDetach:
			return sqlite.AuthorizerDeny
		}
		return allowIf(write)
	}
}

func allowIf(ok bool) sqlite.AuthorizerReturnCode {
	if ok {
		return sqlite.AuthorizerOK
	}
	return sqlite.AuthorizerDeny
}

func authorizing(fn sqlite.AuthorizerFn) *sqlite.Driver {
	d := &sqlite.Driver{}
	d.RegisterConnectionHook(func(c sqlite.ExecQuerierContext, _ string) error {
		r, ok := c.(sqlite.AuthorizerRegisterer)
		if !ok {
			return errors.New("the SQLite driver offers no authorizer, without which the SQL tools do not open")
		}
		return r.RegisterAuthorizer(fn)
	})
	return d
}

// connector opens dsn with one of the drivers above.
type connector struct {
	d   *sqlite.Driver
	dsn string
}

func (c connector) Connect(context.Context) (driver.Conn, error) { return c.d.Open(c.dsn) }
func (c connector) Driver() driver.Driver                        { return c.d }

func openSQLite(d *sqlite.Driver, dsn string) *sql.DB { return sql.OpenDB(connector{d, dsn}) }
