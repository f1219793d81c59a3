package sqlitestore

import (
	"bytes"
	"database/sql"
	"os"
	"path/filepath"
	"testing"
)

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

// checkCrashCopy copies the database at path and its log, as a crash
// would leave them on disk (what the write connection wrote, nothing it
// still holds), opens the copy, and checks that it recovers rows rows and
// passes SQLite's integrity check.
func checkCrashCopy(t *testing.T, path string, rows int) {
	t.Helper()
	crash := filepath.Join(t.TempDir(), "crash.db")
	for _, suffix := range []string{"", "-wal"} {
		data, err := os.ReadFile(path + suffix)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(crash+suffix, data, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	copied := openWAL(t, crash, "")
	var n int
	var ok string
	if err := copied.QueryRow("SELECT count(*) FROM t").Scan(&n); err != nil || n != rows {
		t.Fatalf("the copy recovers %d rows (%v), want %d", n, err, rows)
	}
	if err := copied.QueryRow("PRAGMA integrity_check").Scan(&ok); err != nil || ok != "ok" {
		t.Fatalf("integrity check of the copy: %q, %v", ok, err)
	}
}

// A transaction larger than the page cache spills pages to the log before
// its commit; SQLite then writes the headers of its frames again once the
// commit frame is written, the commit frame's last. The log holds that
// header once the commit returns, so that an fsync then (the syncer's,
// on a descriptor of its own) makes the transaction durable: a copy taken
// as a crash would leave the files recovers it.
func TestWALBufferWritesASpilledCommitWhole(t *testing.T) {
	if err := registerWALBuffer(); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "spill.db")
	db := openWAL(t, path, walBufferVFS)
	if _, err := db.Exec("PRAGMA cache_size = 50"); err != nil { // spill early
		t.Fatal(err)
	}
	row := bytes.Repeat([]byte("s"), 3000)
	tx, err := db.Begin()
	if err != nil {
		t.Fatal(err)
	}
	for range 500 {
		if _, err := tx.Exec("INSERT INTO t (v) VALUES (?)", row); err != nil {
			t.Fatal(err)
		}
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	checkCrashCopy(t, path, 500)
}
