package stream

import (
	"io"
	"net"
	"syscall"
	"unsafe"
)

// A lone caller spends most of its time waiting for its answer, and so
// does the rest of a client that enqueues one job at a time: every P of
// the runtime is then idle, and the runtime's monitor thread sleeps until
// a goroutine next enters a system call through the runtime. A read or
// write through net.Conn does, so each call of a lone caller woke that
// thread, most often on another CPU. The stream's socket is non-blocking,
// so its reads and writes return at once and need no such entry:
// rawSocket makes them as raw system calls, and waits for the socket
// through the runtime's poller as net.Conn does, deadlines included.

// rawSocket reads and writes a connection's socket with raw system calls.
type rawSocket struct{ raw syscall.RawConn }

// socketOf returns the socket of nc, whose raw connection is raw, read
// and written with raw system calls; nc itself when raw is nil (a
// connection without a descriptor of its own, such as a pipe in tests).
func socketOf(nc net.Conn, raw syscall.RawConn) io.ReadWriter {
	if raw == nil {
		return nc
	}
	return rawSocket{raw}
}

// Read reads at most len(p) bytes, waiting until some arrive; it returns
// io.EOF once the peer closed the connection.
func (s rawSocket) Read(p []byte) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	var n int
	var errno syscall.Errno
	err := s.raw.Read(func(fd uintptr) bool {
		for {
			r, _, e := syscall.RawSyscall(syscall.SYS_READ, fd, uintptr(unsafe.Pointer(&p[0])), uintptr(len(p)))
			switch e {
			case syscall.EINTR:
				continue
			case syscall.EAGAIN:
				return false // wait until the socket can be read
			}
			n, errno = int(r), e
			return true
		}
	})
	switch {
	case err != nil:
		return 0, err
	case errno != 0:
		return 0, errno
	case n == 0:
		return 0, io.EOF
	}
	return n, nil
}

// Write writes all of p, waiting while the socket's buffer is full.
func (s rawSocket) Write(p []byte) (int, error) {
	written := 0
	var errno syscall.Errno
	err := s.raw.Write(func(fd uintptr) bool {
		for written < len(p) {
			r, _, e := syscall.RawSyscall(syscall.SYS_WRITE, fd, uintptr(unsafe.Pointer(&p[written])), uintptr(len(p)-written))
			switch e {
			case 0:
				written += int(r)
			case syscall.EINTR:
			case syscall.EAGAIN:
				return false // wait until the socket can be written
			default:
				errno = e
				return true
			}
		}
		return true
	})
	if err == nil && errno != 0 {
		err = errno
	}
	return written, err
}

// peekClosed reports, without reading or waiting, whether the peer of
// raw closed the connection (io.EOF) or reset it; nil when it is open.
func peekClosed(raw syscall.RawConn) error {
	var n uintptr
	var errno syscall.Errno
	err := raw.Read(func(fd uintptr) bool {
		var b [1]byte
		n, _, errno = syscall.RawSyscall6(syscall.SYS_RECVFROM, fd, uintptr(unsafe.Pointer(&b[0])), 1,
			syscall.MSG_PEEK|syscall.MSG_DONTWAIT, 0, 0)
		return true
	})
	switch {
	case err != nil:
		return err
	case errno == syscall.EAGAIN:
		return nil
	case errno != 0:
		return errno
	case n == 0:
		return io.EOF
	}
	return nil
}
