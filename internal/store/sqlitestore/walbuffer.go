package sqlitestore

// int spool_register_wal_buffer(const char *name, const char *base, long long growStep, long long growLimit);
import "C"

import (
	"fmt"
	"net/url"
	"sync"
)

// exclusiveVFS names the VFS of every connection to the database, directly
// or under walBufferVFS: SQLite's unix VFS, except that the first
// connection of the process locks the database against every other
// process, and the connections of the process then coordinate among
// themselves in memory. A transaction then takes its locks without a
// system call (about six fcntl calls a commit otherwise), the write-ahead
// log's index lives in the process's memory rather than in a -shm file,
// and a second server on the same data folder fails to open it rather
// than share it.
const exclusiveVFS = "unix-excl"

// walBufferVFS names the VFS of the write connection (walbuffer.c):
// exclusiveVFS, except that the frames a transaction writes to the
// write-ahead log are gathered and written with one system call when its
// commit frame is complete, where SQLite makes two calls per frame (its
// header, then its page). The bytes reach the file before SQLite
// publishes the commit, so readers and the syncer's fsync see them as
// before; a failed write fails the commit as before. Anything that reads,
// sizes, syncs, truncates or closes the log writes what is gathered
// first. It also grows the log ahead of its frames, walGrowStep at a
// time, so that the fsyncs of a growing log need not write its length.
const walBufferVFS = "spool-walbuffer"

const (
	// walSizeLimit is the length in bytes that the write-ahead log
	// shrinks back to after a burst (SQLite's journal_size_limit), and up
	// to which walBufferVFS grows it ahead of its frames.
	walSizeLimit = 64 << 20
	// walGrowStep is how far walBufferVFS grows the log at a time: when
	// a write would lengthen it, it is lengthened with zeros to the next
	// multiple of walGrowStep first (walbuffer.c, grow).
	walGrowStep = 1 << 20
)

var (
	registerOnce sync.Once
	registerErr  error
)

// registerWALBuffer registers walBufferVFS once per process.
func registerWALBuffer() error {
	registerOnce.Do(func() {
		if rc := C.spool_register_wal_buffer(C.CString(walBufferVFS), C.CString(exclusiveVFS), C.longlong(walGrowStep), C.longlong(walSizeLimit)); rc != 0 {
			registerErr = fmt.Errorf("register the %s VFS: SQLite error %d", walBufferVFS, int(rc))
		}
	})
	return registerErr
}

// busyTimeoutMillis is how long a connection waits for a lock held by
// another process before failing with "database is locked": how long a
// server starting on a data folder in use waits for the other process to
// let go of it (see exclusiveVFS).
const busyTimeoutMillis = 5000

// dsn is the go-sqlite3 connection string for path; sync is full, normal
// or off.
func dsn(path, sync string, readOnly bool) string {
	q := url.Values{}
	q.Set("_journal_mode", "WAL")
	q.Set("_busy_timeout", fmt.Sprint(busyTimeoutMillis))
	q.Set("_foreign_keys", "0")
	switch sync {
	case "normal":
		q.Set("_synchronous", "NORMAL")
	case "off":
		q.Set("_synchronous", "OFF")
	default:
		q.Set("_synchronous", "FULL")
	}
	if readOnly {
		q.Set("_query_only", "1")
		q.Set("_cache_size", "-16384")
		q.Set("vfs", exclusiveVFS)
	} else {
		q.Set("_cache_size", "-65536")
		q.Set("vfs", walBufferVFS)
	}
	return "file:" + (&url.URL{Path: path}).EscapedPath() + "?" + q.Encode()
}
