// Package tail keeps the end of a stream, such as the output of a child
// process, for error messages: bounded however much is written.
package tail

import (
	"strconv"
	"sync"
)

// Buffer keeps the last Max bytes written to it. It is safe for concurrent
// use; the zero value keeps nothing until Max is set.
type Buffer struct {
	// Max is how many bytes to keep.
	Max int

	mu      sync.Mutex
	buf     []byte
	dropped int64
}

// Write keeps p, dropping the oldest bytes past Max. It never fails.
func (t *Buffer) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.buf = append(t.buf, p...)
	if over := len(t.buf) - t.Max; over > 0 {
		t.dropped += int64(over)
		t.buf = append(t.buf[:0], t.buf[over:]...)
	}
	return len(p), nil
}

// String returns the bytes kept, noting how many were dropped before them.
func (t *Buffer) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.dropped > 0 {
		return "[" + strconv.FormatInt(t.dropped, 10) + " earlier bytes dropped]\n" + string(t.buf)
	}
	return string(t.buf)
}
