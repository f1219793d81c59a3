package sqlitestore

import (
	"context"
	"database/sql"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/mattn/go-sqlite3"
)

// openRawTestConn returns a connection to a new database with a table t
// of a key and six columns of any type, for raw statements.
func openRawTestConn(t *testing.T) (*sql.DB, *sql.Conn) {
	t.Helper()
	if err := registerWALBuffer(); err != nil {
		t.Fatal(err)
	}
	db, err := sql.Open("sqlite3", dsn(filepath.Join(t.TempDir(), "raw.db"), "normal", false))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = db.Close() })
	conn, err := db.Conn(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	if _, err := conn.ExecContext(context.Background(),
		`CREATE TABLE t (k INTEGER PRIMARY KEY, a ANY, b ANY, c ANY, d ANY, e ANY, f ANY) STRICT`); err != nil {
		t.Fatal(err)
	}
	return db, conn
}

// readRow returns the typeof and the value of every column of row k.
func readRow(t *testing.T, conn *sql.Conn, k int64) []any {
	t.Helper()
	row := make([]any, 12)
	ptrs := make([]any, len(row))
	for i := range row {
		ptrs[i] = &row[i]
	}
	err := conn.QueryRowContext(context.Background(), `SELECT typeof(a), a, typeof(b), b, typeof(c), c,
		typeof(d), d, typeof(e), e, typeof(f), f FROM t WHERE k = ?`, k).Scan(ptrs...)
	if err != nil {
		t.Fatalf("read row %d: %v", k, err)
	}
	return row
}

// A statement run with packed arguments stores what go-sqlite3 stores for
// the same arguments, type for type and byte for byte, and reports the
// rows it changed.
func TestPackedExecMatchesTheDriver(t *testing.T) {
	t.Parallel()
	_, conn := openRawTestConn(t)
	ctx := context.Background()
	raw, err := prepareRaw(ctx, conn, `INSERT INTO t (k, a, b, c, d, e, f) VALUES (?, ?, ?, ?, ?, ?, ?), (?, ?, ?, ?, ?, ?, ?)`)
	if err != nil {
		t.Fatalf("prepare: %v", err)
	}
	defer func() { _ = raw.close() }()
	rows := [][]any{
		{nil, 7, int64(math.MinInt64), true, math.Pi, "jobs ✓ \x00 after a NUL"},
		{[]byte{}, []byte("blob\x00bytes"), "", false, -0.5, []byte(nil)},
		{strings.Repeat("x", 70000), int64(math.MaxInt64), 0, []byte(strings.Repeat("y", 5000)), nil, 1e300},
	}
	for i := 0; i < len(rows); i += 2 {
		pair := rows[i:min(i+2, len(rows))]
		if len(pair) == 1 {
			pair = append(pair, rows[0])
		}
		var args []any
		for k, r := range pair {
			args = append(append(args, int64(100+2*i+k)), r...)
		}
		n, err := raw.exec(args)
		if err != nil || n != 2 {
			t.Fatalf("packed insert of rows %d: %d changed, %v", i, n, err)
		}
		for k, r := range pair {
			if _, err := conn.ExecContext(ctx, `INSERT INTO t (k, a, b, c, d, e, f) VALUES (?, ?, ?, ?, ?, ?, ?)`,
				append([]any{int64(200 + 2*i + k)}, r...)...); err != nil {
				t.Fatalf("driver insert: %v", err)
			}
			got, want := readRow(t, conn, int64(100+2*i+k)), readRow(t, conn, int64(200+2*i+k))
			if !reflect.DeepEqual(got, want) {
				t.Fatalf("row %v:\npacked stored %v\ndriver stored %v", r, got, want)
			}
		}
	}
}

// A packed statement that fails returns SQLite's codes and message, and
// the statement runs again afterwards.
func TestPackedExecFailsWithSQLitesError(t *testing.T) {
	t.Parallel()
	_, conn := openRawTestConn(t)
	ctx := context.Background()
	raw, err := prepareRaw(ctx, conn, `INSERT INTO t (k, a) VALUES (?, ?)`)
	if err != nil {
		t.Fatalf("prepare: %v", err)
	}
	defer func() { _ = raw.close() }()
	if _, err := raw.exec([]any{1, "first"}); err != nil {
		t.Fatalf("insert: %v", err)
	}
	_, err = raw.exec([]any{1, "again"})
	var se sqlite3.Error
	if !errors.As(err, &se) || se.Code != sqlite3.ErrConstraint || se.ExtendedCode != sqlite3.ErrConstraintPrimaryKey ||
		!strings.Contains(err.Error(), "UNIQUE constraint failed: t.k") {
		t.Fatalf("duplicate key: %v (%#v), want SQLite's primary key constraint error", err, se)
	}
	_, err = raw.exec([]any{2, "b", "one too many"})
	if !errors.As(err, &se) || se.Code != sqlite3.ErrRange {
		t.Fatalf("an argument too many: %v, want SQLite's range error", err)
	}
	if _, err := raw.exec([]any{2, struct{}{}}); err == nil || !strings.Contains(err.Error(), "cannot be packed") {
		t.Fatalf("an argument of no SQLite type: %v", err)
	}
	if n, err := raw.exec([]any{3, "after"}); err != nil || n != 1 {
		t.Fatalf("insert after the failures: %d, %v", n, err)
	}
	if _, err := raw.exec([]any{4, strings.Repeat("z", 2*maxKeptArgBytes)}); err != nil {
		t.Fatalf("insert a large text: %v", err)
	}
	if kept := cap(raw.packed.args.buf); kept > maxKeptArgBytes {
		t.Fatalf("the statement keeps a buffer of %d bytes after a large run, want at most %d", kept, maxKeptArgBytes)
	}
	if got := readRow(t, conn, 3); got[1] != "after" {
		t.Fatalf("row 3: %v", got)
	}
}

// A job inserted without a payload, a unique key or a group stores NULL in
// those columns, as the partial indexes on them expect; one with them
// stores them.
func TestInsertStoresAbsentColumnsAsNull(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ps := params("q", 2)
	ps[0].Payload = nil
	ps[1].Queue, ps[1].UniqueKey, ps[1].Group = "grouped", "key", "g"
	b.insert(ps...)
	db, err := sql.Open("sqlite3", dsn(filepath.Join(b.dir, "spool.db"), "normal", true))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	for i, want := range []string{"null null null", "blob text text"} {
		var got string
		if err := db.QueryRow(`SELECT typeof(payload) || ' ' || typeof(unique_key) || ' ' || typeof(grp) FROM jobs WHERE id = ?`,
			ps[i].ID).Scan(&got); err != nil {
			t.Fatalf("job %d: %v", i, err)
		}
		if got != want {
			t.Fatalf("job %d: payload, unique key and group are of types %q, want %q", i, got, want)
		}
	}
}

// exec runs the statement with args, which must be nil, ints, int64s,
// float64s, bools, strings or []bytes, and returns the number of rows it
// changed.
func (r *rawStmt) exec(args []any) (int64, error) {
	packed := r.args()
	for _, a := range args {
		if err := packed.add(a); err != nil {
			packed.reset()
			return 0, err
		}
	}
	return r.execArgs()
}

// add packs a, which must be nil, an int, int64, float64, bool, string or
// []byte.
func (p *packedArgs) add(a any) error {
	switch v := a.(type) {
	case nil:
		p.addNull()
	case int:
		p.addInt(int64(v))
	case int64:
		p.addInt(v)
	case bool:
		var n int64
		if v {
			n = 1
		}
		p.addInt(n)
	case float64:
		p.buf = binary.NativeEndian.AppendUint64(append(p.buf, argFloat), math.Float64bits(v))
		p.n++
	case string:
		p.addText(v)
	case []byte:
		p.addBlob(v)
	default:
		return fmt.Errorf("argument %d: %T cannot be packed", p.n+1, a)
	}
	return nil
}
