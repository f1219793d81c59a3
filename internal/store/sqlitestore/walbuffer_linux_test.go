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
// reopen. The commits counted write over a log already grown (see
// TestWALBufferGrowsTheLogAhead), as a log does once it restarts.
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
	writesPerCommit(t, db, 200, 100)
	if _, err := db.Exec("PRAGMA wal_checkpoint(RESTART)"); err != nil {
		t.Fatal(err)
	}
	if got := writesPerCommit(t, db, 200, 100); got > 1.01 {
		t.Fatalf("the buffering VFS made %.2f writes a commit, want one", got)
	}
	reader := openWAL(t, path, "")
	var n int
	if err := reader.QueryRow("SELECT count(*) FROM t").Scan(&n); err != nil || n != 400 {
		t.Fatalf("another connection counts %d rows (%v), want 400", n, err)
	}
}
