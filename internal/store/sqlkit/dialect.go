// Package sqlkit is the store logic that the SQLite and the PostgreSQL
// stores share over tables of one shape: the statements and the decisions
// are written here once, and each store says how it spells SQL (Dialect)
// and how it runs statements (DB).
package sqlkit

import (
	"context"
	"database/sql"
	"fmt"
	"strings"
	"time"
)

// Dialect is how one store spells what the shared statements need.
// Statements are written here with numbered placeholders ($1) and the
// tokens {false}, {bytewise}, {in} and {forupdate}.
type Dialect struct {
	// Prefix starts the name of every table.
	Prefix string
	// Param starts a numbered placeholder: "$" ($1) or "?" (?1).
	Param string
	// Nanos keeps times as unix nanoseconds; otherwise they are
	// timestamps, kept to the microsecond.
	Nanos bool
	// False is the literal of false, spelt as partial indexes spell it.
	False string
	// Bytewise is the collation that orders text byte by byte.
	Bytewise string
	// Hints names the index a query must use (INDEXED BY).
	Hints bool
	// In is the condition that the value before it is one of the list
	// $1, whose argument List makes of the strings.
	In   string
	List func([]string) any
	// ForUpdate ends a query that locks the rows it reads until the
	// write ends; empty where one writer serialises every write.
	ForUpdate string
	// Lock takes, until the write ends, the lock of name $2 for purpose
	// $1 among the nodes; empty where one writer serialises every write.
	Lock string
}

// render spells query, written with $n placeholders and the tokens, in d.
func (d *Dialect) render(query string) string {
	query = strings.NewReplacer("{false}", d.False, "{bytewise}", d.Bytewise, "{in}", d.In,
		"{forupdate}", d.ForUpdate).Replace(query)
	return strings.ReplaceAll(query, "$", d.Param)
}

// indexed is the hint that a query reads table through index (with the
// prefix), where d takes hints.
func (d *Dialect) indexed(index string) string {
	if !d.Hints {
		return ""
	}
	return " INDEXED BY " + d.Prefix + index
}

// trunc is t as a column of d keeps it.
func (d *Dialect) trunc(t time.Time) time.Time {
	if d.Nanos || t.IsZero() {
		return t
	}
	return t.UTC().Truncate(time.Microsecond)
}

// time is the argument of t for a time column of d.
func (d *Dialect) time(t time.Time) any {
	if d.Nanos {
		return t.UTC().UnixNano()
	}
	return d.trunc(t)
}

// nullTime is time, NULL when t is zero.
func (d *Dialect) nullTime(t time.Time) any {
	if t.IsZero() {
		return nil
	}
	return d.time(t)
}

// nullString is the argument of s, NULL when empty.
func nullString(s string) any {
	if s == "" {
		return nil
	}
	return s
}

// DB is one store's database, as the shared code runs statements on it.
type DB interface {
	// Read returns the store's read side, or why it cannot be read (the
	// store closed).
	Read() (Conn, error)
	// Write runs fn as one write of the store: what fn writes commits
	// together, or nothing of it when fn fails. weight is how much of a
	// batch of writes fn takes (jobs or items, at least 1).
	Write(ctx context.Context, weight int, fn func(Conn) error) error
	// WriteAlone runs fn, whose one statement commits on its own.
	WriteAlone(ctx context.Context, fn func(Conn) error) error
	// Wrap gives err, met by the call what, that call's context and the
	// store's sentinels; nil stays nil.
	Wrap(what string, err error) error
}

// Conn runs statements: a store's read side or one of its writes.
type Conn interface {
	// Exec runs a statement and returns how many rows it changed.
	Exec(ctx context.Context, query string, args ...any) (int64, error)
	// Query runs a query and calls scan on each row it returns, in order,
	// until scan fails.
	Query(ctx context.Context, query string, args []any, scan func(Row) error) error
}

// Row is one row of a query's result.
type Row interface {
	Scan(dest ...any) error
}

// queryRow scans into dest the first row that query returns; found is
// false when it returns none.
func queryRow(ctx context.Context, c Conn, query string, args []any, dest ...any) (found bool, err error) {
	err = c.Query(ctx, query, args, func(r Row) error {
		if found {
			return nil
		}
		found = true
		return r.Scan(dest...)
	})
	return found, err
}

// step is one statement of a write, named for its errors.
type step struct {
	what  string
	query string
	args  []any
}

// run runs steps in order, skipping those without a statement, and stops
// at the first that fails.
func run(ctx context.Context, c Conn, steps ...step) error {
	for _, s := range steps {
		if s.query == "" {
			continue
		}
		if _, err := c.Exec(ctx, s.query, s.args...); err != nil {
			return fmt.Errorf("%s: %w", s.what, err)
		}
	}
	return nil
}

// timeCol scans a time column of either store, unix nanoseconds or a
// timestamp, into a time.Time in UTC; NULL is the zero time.
type timeCol time.Time

var _ sql.Scanner = (*timeCol)(nil)

// timeInto is the scan destination of the time column read into t.
func timeInto(t *time.Time) *timeCol { return (*timeCol)(t) }

// Scan implements sql.Scanner.
func (t *timeCol) Scan(src any) error {
	switch v := src.(type) {
	case nil:
		*t = timeCol{}
	case int64:
		*t = timeCol(time.Unix(0, v).UTC())
	case time.Time:
		*t = timeCol(v.UTC())
	default:
		return fmt.Errorf("scan time: cannot read %T", src)
	}
	return nil
}
