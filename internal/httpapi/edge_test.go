package httpapi

import (
	"io"
	"net"
	"syscall"
	"testing"
	"time"
)

// A connection of CatalogListener closes its writing side alone, as the
// TCP connection under it does, so that closes that avoid resets (the
// stream's, net/http's) still can.
func TestCatalogConnClosesWriteAlone(t *testing.T) {
	t.Parallel()
	client, server := catalogPair(t)
	cw, ok := server.(interface{ CloseWrite() error })
	if !ok {
		t.Fatalf("%T has no CloseWrite", server)
	}
	if err := cw.CloseWrite(); err != nil {
		t.Fatal(err)
	}
	_ = client.SetReadDeadline(time.Now().Add(5 * time.Second))
	if n, err := client.Read(make([]byte, 1)); n != 0 || err != io.EOF {
		t.Fatalf("client read after CloseWrite: %d %v, want EOF", n, err)
	}
	if _, err := client.Write([]byte("still open")); err != nil {
		t.Fatal(err)
	}
	_ = server.SetReadDeadline(time.Now().Add(5 * time.Second))
	got := make([]byte, 10)
	if _, err := io.ReadFull(server, got); err != nil || string(got) != "still open" {
		t.Fatalf("server read after its CloseWrite: %q %v", got, err)
	}
}

// A connection of CatalogListener gives the raw connection of the TCP
// connection under it, through which the stream server learns how many
// bytes wait unread.
func TestCatalogConnGivesTheRawConnection(t *testing.T) {
	t.Parallel()
	_, server := catalogPair(t)
	sc, ok := server.(syscall.Conn)
	if !ok {
		t.Fatalf("%T has no SyscallConn", server)
	}
	raw, err := sc.SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	var fd uintptr
	if err := raw.Control(func(f uintptr) { fd = f }); err != nil || fd == 0 {
		t.Fatalf("raw connection: descriptor %d, %v", fd, err)
	}
}

// catalogPair returns both ends of a loopback TCP connection whose server
// end came from CatalogListener; they close when the test ends.
func catalogPair(t *testing.T) (client, server net.Conn) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	cl := CatalogListener(ln)
	t.Cleanup(func() { _ = cl.Close() })
	client, err = net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = client.Close() })
	server, err = cl.Accept()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = server.Close() })
	return client, server
}
