package stream

import (
	"bytes"
	"errors"
	"io"
	"net"
	"os"
	"syscall"
	"testing"
	"time"
)

// tcpPair returns the two ends of a loopback TCP connection.
func tcpPair(t *testing.T) (client, server net.Conn) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	accepted := make(chan net.Conn, 1)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			accepted <- nil
			return
		}
		accepted <- c
	}()
	client, err = net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	server = <-accepted
	if server == nil {
		t.Fatal("accept failed")
	}
	t.Cleanup(func() { client.Close(); server.Close() })
	return client, server
}

// rawSocketOf is the socket Dial makes of nc.
func rawSocketOf(t *testing.T, nc net.Conn) io.ReadWriter {
	t.Helper()
	var raw syscall.RawConn
	if sc, ok := nc.(syscall.Conn); ok {
		var err error
		if raw, err = sc.SyscallConn(); err != nil {
			t.Fatal(err)
		}
	}
	return socketOf(nc, raw)
}

func TestRawSocketIsUsedForTCP(t *testing.T) {
	client, _ := tcpPair(t)
	if _, ok := rawSocketOf(t, client).(rawSocket); !ok {
		t.Fatalf("rawSocketOf(%T) = %T, want rawSocket", client, rawSocketOf(t, client))
	}
	a, b := net.Pipe()
	defer a.Close()
	defer b.Close()
	if got := rawSocketOf(t, a); got != io.ReadWriter(a) {
		t.Fatalf("rawSocketOf(pipe) = %T, want the pipe itself", got)
	}
}

// A write far larger than the socket's buffers waits for the peer to read
// and arrives whole and in order; the peer's close then reads as io.EOF.
func TestRawSocketWritesAndReadsEverything(t *testing.T) {
	client, server := tcpPair(t)
	sock := rawSocketOf(t, client)
	want := make([]byte, 32<<20)
	for i := range want {
		want[i] = byte(i * 7)
	}
	peer := rawSocketOf(t, server)
	got := make(chan []byte, 1)
	go func() {
		b, _ := io.ReadAll(peer)
		got <- b
	}()
	n, err := sock.Write(want)
	if err != nil || n != len(want) {
		t.Fatalf("Write = %d, %v; want %d, nil", n, err, len(want))
	}
	client.(*net.TCPConn).CloseWrite()
	if b := <-got; !bytes.Equal(b, want) {
		t.Fatalf("the peer read %d bytes, not the %d written in order", len(b), len(want))
	}

	if _, err := server.Write([]byte("answer")); err != nil {
		t.Fatal(err)
	}
	server.Close()
	b, err := io.ReadAll(sock)
	if err != nil || string(b) != "answer" {
		t.Fatalf("ReadAll = %q, %v; want \"answer\", nil (EOF)", b, err)
	}
}

// A read waiting for bytes ends at the connection's read deadline, which
// is how a caller that leaves stops waiting for an answer.
func TestRawSocketReadEndsAtDeadline(t *testing.T) {
	client, _ := tcpPair(t)
	sock := rawSocketOf(t, client)
	client.SetReadDeadline(time.Now().Add(50 * time.Millisecond))
	start := time.Now()
	n, err := sock.Read(make([]byte, 16))
	if n != 0 || !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("Read = %d, %v; want 0 and a deadline error", n, err)
	}
	if waited := time.Since(start); waited < 40*time.Millisecond {
		t.Fatalf("Read returned after %v, before the deadline", waited)
	}
}

// A connection closed here fails a waiting read at once.
func TestRawSocketReadEndsWhenClosed(t *testing.T) {
	client, _ := tcpPair(t)
	sock := rawSocketOf(t, client)
	done := make(chan error, 1)
	go func() {
		_, err := sock.Read(make([]byte, 16))
		done <- err
	}()
	time.Sleep(20 * time.Millisecond)
	client.Close()
	select {
	case err := <-done:
		if !errors.Is(err, net.ErrClosed) {
			t.Fatalf("Read = %v, want net.ErrClosed", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Read still waits after Close")
	}
}

// peekClosed tells an open connection, one with unread bytes, and one the
// peer closed apart, and reads nothing.
func TestPeekClosed(t *testing.T) {
	client, server := tcpPair(t)
	raw, err := client.(*net.TCPConn).SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	if err := peekClosed(raw); err != nil {
		t.Fatalf("open connection: peekClosed = %v, want nil", err)
	}
	server.Write([]byte("x"))
	time.Sleep(20 * time.Millisecond)
	if err := peekClosed(raw); err != nil {
		t.Fatalf("unread byte: peekClosed = %v, want nil", err)
	}
	b := make([]byte, 1)
	if _, err := io.ReadFull(client, b); err != nil || b[0] != 'x' {
		t.Fatalf("the byte peeked was taken: %q, %v", b, err)
	}
	server.Close()
	deadline := time.Now().Add(5 * time.Second)
	for peekClosed(raw) == nil {
		if time.Now().After(deadline) {
			t.Fatal("peekClosed never saw the close")
		}
		time.Sleep(5 * time.Millisecond)
	}
	if err := peekClosed(raw); !errors.Is(err, io.EOF) {
		t.Fatalf("closed connection: peekClosed = %v, want io.EOF", err)
	}
}
