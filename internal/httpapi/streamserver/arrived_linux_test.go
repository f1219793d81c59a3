//go:build linux

package streamserver

import (
	"net"
	"testing"
	"time"
)

// arrivedBytes counts the bytes a TCP connection received and nobody read.
func TestArrivedBytesCountsWhatWaitsUnread(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	client, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	server, err := ln.Accept()
	if err != nil {
		t.Fatal(err)
	}
	defer server.Close()
	if n := arrivedBytes(server); n != 0 {
		t.Fatalf("arrivedBytes = %d before any write, want 0", n)
	}
	if _, err := client.Write([]byte("0123456789")); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for arrivedBytes(server) != 10 {
		if time.Now().After(deadline) {
			t.Fatalf("arrivedBytes = %d 5 s after a write of 10 bytes", arrivedBytes(server))
		}
		time.Sleep(time.Millisecond)
	}
	if _, err := server.Read(make([]byte, 4)); err != nil {
		t.Fatal(err)
	}
	if n := arrivedBytes(server); n != 6 {
		t.Fatalf("arrivedBytes = %d after reading 4 of 10, want 6", n)
	}
}
