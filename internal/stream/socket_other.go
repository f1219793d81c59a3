//go:build !linux

package stream

import (
	"io"
	"net"
	"syscall"
)

// socketOf returns nc: raw system calls are made on Linux only (see
// socket_linux.go).
func socketOf(nc net.Conn, _ syscall.RawConn) io.ReadWriter { return nc }
