//go:build linux

package sqlitestore

import (
	"os"
	"syscall"
)

// syncData flushes f's data, and the size that reading it back needs, to
// the disk: fdatasync, as SQLite syncs its write-ahead log.
func syncData(f *os.File) error {
	for {
		err := syscall.Fdatasync(int(f.Fd()))
		if err != syscall.EINTR {
			if err != nil {
				return &os.PathError{Op: "fdatasync", Path: f.Name(), Err: err}
			}
			return nil
		}
	}
}
