package tail

import (
	"strings"
	"testing"
)

func TestBufferKeepsTheEnd(t *testing.T) {
	t.Parallel()
	b := &Buffer{Max: 5}
	_, _ = b.Write([]byte("abc"))
	if b.String() != "abc" {
		t.Fatalf("short write: %q", b.String())
	}
	_, _ = b.Write([]byte("defgh"))
	if got := b.String(); !strings.HasSuffix(got, "\ndefgh") || !strings.HasPrefix(got, "[3 earlier bytes dropped]") {
		t.Fatalf("after overflow: %q", got)
	}
}
