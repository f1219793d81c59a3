//go:build !linux

package sqlitestore

import "os"

// syncData flushes f's data to the disk.
func syncData(f *os.File) error { return f.Sync() }
