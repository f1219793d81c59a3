package sqlitestore

import (
	"bytes"
	"database/sql"
	"encoding/binary"
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

// insertRows inserts n rows of row into table t of db in one transaction,
// and commits it, or rolls it back when commit is false.
func insertRows(t *testing.T, db *sql.DB, row []byte, n int, commit bool) {
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

// openSpilling opens a new database named name through the buffering VFS
// (see openWAL), with a page cache of 50 pages, so that a transaction
// spills pages to the log early; it returns the database and its path.
func openSpilling(t *testing.T, name string) (*sql.DB, string) {
	t.Helper()
	if err := registerWALBuffer(); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), name)
	db := openWAL(t, path, walBufferVFS)
	if _, err := db.Exec("PRAGMA cache_size = 50"); err != nil {
		t.Fatal(err)
	}
	return db, path
}

// Transactions larger than what the VFS gathers, one rolled back after
// its pages spilled to the log, and a checkpoint that truncates the log
// leave a database whose every committed row is there and that passes
// SQLite's integrity check, before and after a reopen.
func TestWALBufferKeepsLargeTransactionsWhole(t *testing.T) {
	db, path := openSpilling(t, "large.db")
	row := bytes.Repeat([]byte("y"), 3000)
	insert := func(n int, commit bool) {
		t.Helper()
		insertRows(t, db, row, n, commit)
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

// walFramesEnd reads the write-ahead log at path as SQLite's recovery
// does and returns the offset just past its last valid frame: frames
// follow the header while they carry the header's salt.
func walFramesEnd(t *testing.T, path string) int64 {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if len(data) < 32 {
		return int64(len(data))
	}
	frame := 24 + int64(binary.BigEndian.Uint32(data[8:12]))
	salts := data[16:24]
	end := int64(32)
	for end+frame <= int64(len(data)) && bytes.Equal(data[end+8:end+16], salts) {
		end += frame
	}
	return end
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
	db, path := openSpilling(t, "spill.db")
	insertRows(t, db, bytes.Repeat([]byte("s"), 3000), 500, true)
	checkCrashCopy(t, path, 500)
}

// walFileSize is the length of the file at path.
func walFileSize(t *testing.T, path string) int64 {
	t.Helper()
	info, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	return info.Size()
}

// The buffering VFS grows the log ahead of its frames to whole steps, so
// that its commits write over a log already long enough; SQLite reads the
// zeros after the last frame as the end of the log, so a copy taken as a
// crash would leave it recovers every commit; a truncated log grows
// again from its new length; and past walSizeLimit the log is as long as
// its frames, so that SQLite's journal_size_limit has nothing to cut.
func TestWALBufferGrowsTheLogAhead(t *testing.T) {
	if err := registerWALBuffer(); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	path := filepath.Join(dir, "grow.db")
	db := openWAL(t, path, walBufferVFS)
	row := bytes.Repeat([]byte("g"), 3000)
	rows := 0
	commit := func(n int) {
		t.Helper()
		insertRows(t, db, row, n, true)
		rows += n
	}
	grownAhead := func() {
		t.Helper()
		size, end := walFileSize(t, path+"-wal"), walFramesEnd(t, path+"-wal")
		if size%walGrowStep != 0 || size < end || size-end > walGrowStep {
			t.Fatalf("log of %d bytes for frames up to %d: want the next multiple of %d", size, end, walGrowStep)
		}
	}
	for range 40 { // about 3 MB of frames, commits of about 80 KB
		commit(20)
		grownAhead()
	}

	checkCrashCopy(t, path, rows)

	if _, err := db.Exec("PRAGMA wal_checkpoint(TRUNCATE)"); err != nil {
		t.Fatal(err)
	}
	commit(1)
	if size := walFileSize(t, path+"-wal"); size != walGrowStep {
		t.Fatalf("after a truncate the log grew to %d bytes, want %d", size, walGrowStep)
	}

	for walFramesEnd(t, path+"-wal") <= walSizeLimit {
		commit(2000)
	}
	if size, end := walFileSize(t, path+"-wal"), walFramesEnd(t, path+"-wal"); size != end {
		t.Fatalf("past the limit the log is %d bytes for frames up to %d, want no more than its frames", size, end)
	}
}
