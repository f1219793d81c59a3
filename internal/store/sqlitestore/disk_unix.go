//go:build linux || darwin

package sqlitestore

import "syscall"

// freeBytes is the room left for this process on the disk of dir; ok is
// false when it cannot be read.
func freeBytes(dir string) (free uint64, ok bool) {
	var st syscall.Statfs_t
	if err := syscall.Statfs(dir, &st); err != nil {
		return 0, false
	}
	return st.Bavail * uint64(st.Bsize), true
}
