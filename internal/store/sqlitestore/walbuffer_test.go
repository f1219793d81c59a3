package sqlitestore

import (
	"bytes"
	"context"
	"database/sql"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

// threadWrites is the number of write system calls the calling thread has
// made, from /proc/thread-self/io.
func threadWrites(t *testing.T) int {
	t.Helper()
	data, err := os.ReadFile("/proc/thread-self/io")
	if err != nil {
		t.Fatalf("read the thread's I/O counts: %v", err)
	}
	for line := range strings.Lines(string(data)) {
		var n int
		if _, err := fmt.Sscanf(line, "syscw: %d", &n); err == nil {
			return n
		}
	}
	t.Fatalf("no syscw in %s", data)
	return 0
}

// openWAL opens a database in WAL mode at path through vfs ("" for the
// default), without automatic checkpoints, on one connection.
func openWAL(t *testing.T, path, vfs string) *sql.DB {
	t.Helper()
	dsn := "file:" + path + "?_journal_mode=WAL&_synchronous=NORMAL"
	if vfs != "" {
		dsn += "&vfs=" + vfs
	}
	db, err := sql.Open("sqlite3", dsn)
	if err != nil {
		t.Fatal(err)
	}
	db.SetMaxOpenConns(1)
	t.Cleanup(func() { _ = db.Close() })
	for _, stmt := range []string{"PRAGMA wal_autocheckpoint = 0", "CREATE TABLE IF NOT EXISTS t (id INTEGER PRIMARY KEY, v BLOB)",
		"CREATE INDEX IF NOT EXISTS t_v ON t (v)"} {
		if _, err := db.Exec(stmt); err != nil {
			t.Fatalf("%s: %v", stmt, err)
		}
	}
	return db
}

// writesPerCommit is the write system calls of each of n commits of one
// row of size bytes into db, on this thread.
func writesPerCommit(t *testing.T, db *sql.DB, n, size int) float64 {
	t.Helper()
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	conn, err := db.Conn(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	row := bytes.Repeat([]byte("x"), size)
	before := threadWrites(t)
	for range n {
		if _, err := conn.ExecContext(context.Background(), "INSERT INTO t (v) VALUES (?)", row); err != nil {
			t.Fatal(err)
		}
	}
	return float64(threadWrites(t)-before) / float64(n)
}

// Through the buffering VFS, a commit writes its frames to the log with
// one system call, where the default VFS makes two a frame (a row and
// its index entry: two frames a commit); what it
// committed is read back by another connection at once, and after a
// reopen.
func TestWALBufferWritesACommitAtOnce(t *testing.T) {
	if err := registerWALBuffer(); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	plain := openWAL(t, filepath.Join(dir, "plain.db"), "")
	if got := writesPerCommit(t, plain, 200, 100); got < 3.9 {
		t.Fatalf("the default VFS made %.2f writes a commit; the test expects two a frame, two frames a commit", got)
	}
	path := filepath.Join(dir, "buffered.db")
	db := openWAL(t, path, walBufferVFS)
	if got := writesPerCommit(t, db, 200, 100); got > 1.05 {
		t.Fatalf("the buffering VFS made %.2f writes a commit, want one", got)
	}
	reader := openWAL(t, path, "")
	var n int
	if err := reader.QueryRow("SELECT count(*) FROM t").Scan(&n); err != nil || n != 200 {
		t.Fatalf("another connection counts %d rows (%v), want 200", n, err)
	}
}

// Transactions larger than what the VFS gathers, one rolled back after
// its pages spilled to the log, and a checkpoint that truncates the log
// leave a database whose every committed row is there and that passes
// SQLite's integrity check, before and after a reopen.
func TestWALBufferKeepsLargeTransactionsWhole(t *testing.T) {
	if err := registerWALBuffer(); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "large.db")
	db := openWAL(t, path, walBufferVFS)
	if _, err := db.Exec("PRAGMA cache_size = 50"); err != nil { // spill early
		t.Fatal(err)
	}
	row := bytes.Repeat([]byte("y"), 3000)
	insert := func(n int, commit bool) {
		t.Helper()
		tx, err := db.Begin()
		if err != nil {
			t.Fatal(err)
		}
		for range n {
			if _, err := tx.Exec("INSERT INTO t (v) VALUES (?)", row); err != nil {
				t.Fatal(err)
			}
		}
		if commit {
			err = tx.Commit()
		} else {
			err = tx.Rollback()
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	insert(2000, true) // about 6 MB of frames: many flushes of the buffer
	insert(1500, false)
	insert(10, true)
	if _, err := db.Exec("PRAGMA wal_checkpoint(TRUNCATE)"); err != nil {
		t.Fatal(err)
	}
	insert(300, true)
	check := func(db *sql.DB) {
		t.Helper()
		var n int
		var ok string
		if err := db.QueryRow("SELECT count(*) FROM t WHERE length(v) = 3000").Scan(&n); err != nil || n != 2310 {
			t.Fatalf("%d rows (%v), want 2310", n, err)
		}
		if err := db.QueryRow("PRAGMA integrity_check").Scan(&ok); err != nil || ok != "ok" {
			t.Fatalf("integrity check: %q, %v", ok, err)
		}
	}
	check(db)
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	check(openWAL(t, path, walBufferVFS))
}
