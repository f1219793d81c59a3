//go:build !linux

package stream

import (
	"io"
	"net"
)

// rawSocketOf returns nc: raw system calls are made on Linux only (see
// socket_linux.go).
func rawSocketOf(nc net.Conn) io.ReadWriter { return nc }
