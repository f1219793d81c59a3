//go:build unix && !linux

package stream

import (
	"io"
	"syscall"
)

// peekClosed reports, without reading or waiting, whether the peer of
// raw closed the connection (io.EOF) or reset it; nil when it is open.
func peekClosed(raw syscall.RawConn) error {
	var n int
	var rerr error
	err := raw.Read(func(fd uintptr) bool {
		var b [1]byte
		n, _, rerr = syscall.Recvfrom(int(fd), b[:], syscall.MSG_PEEK|syscall.MSG_DONTWAIT)
		return true
	})
	switch {
	case err != nil:
		return err
	case rerr == syscall.EAGAIN || rerr == syscall.EWOULDBLOCK:
		return nil
	case rerr != nil:
		return rerr
	case n == 0:
		return io.EOF
	}
	return nil
}
