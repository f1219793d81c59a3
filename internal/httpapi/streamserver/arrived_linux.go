//go:build linux

package streamserver

import (
	"net"
	"syscall"
	"unsafe"
)

// arrivedBytes returns how many bytes nc has received that were not read
// yet, without waiting: what a read of that many bytes takes at once. It
// returns 0 when it cannot tell (a connection without a descriptor, such
// as TLS, whose bytes on the wire are not those read).
func arrivedBytes(nc net.Conn) int {
	sc, ok := nc.(syscall.Conn)
	if !ok {
		return 0
	}
	raw, err := sc.SyscallConn()
	if err != nil {
		return 0
	}
	var n int32
	var errno syscall.Errno
	if err := raw.Control(func(fd uintptr) {
		_, _, errno = syscall.Syscall(syscall.SYS_IOCTL, fd, syscall.TIOCINQ, uintptr(unsafe.Pointer(&n)))
	}); err != nil || errno != 0 {
		return 0
	}
	return int(n)
}
