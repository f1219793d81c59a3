package sqlitestore

// int spool_register_wal_buffer(const char *name);
import "C"

import (
	"fmt"
	"sync"
)

// walBufferVFS names the VFS of the write connection (walbuffer.c): the
// default VFS, except that the frames a transaction writes to the
// write-ahead log are gathered and written with one system call when its
// commit frame is complete, where SQLite makes two calls per frame (its
// header, then its page). The bytes reach the file before SQLite
// publishes the commit, so readers and the syncer's fsync see them as
// before; a failed write fails the commit as before. Anything that reads,
// sizes, syncs, truncates or closes the log writes what is gathered
// first.
const walBufferVFS = "spool-walbuffer"

var (
	registerOnce sync.Once
	registerErr  error
)

// registerWALBuffer registers walBufferVFS once per process.
func registerWALBuffer() error {
	registerOnce.Do(func() {
		if rc := C.spool_register_wal_buffer(C.CString(walBufferVFS)); rc != 0 {
			registerErr = fmt.Errorf("register the %s VFS: SQLite error %d", walBufferVFS, int(rc))
		}
	})
	return registerErr
}
