//go:build linux

package streamserver

import (
	"net"
	"syscall"

	"golang.org/x/sys/unix"
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
	n := 0
	if err := raw.Control(func(fd uintptr) {
		n, err = unix.IoctlGetInt(int(fd), unix.SIOCINQ)
	}); err != nil {
		return 0
	}
	return n
}
