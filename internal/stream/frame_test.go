package stream

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"runtime"
	"strings"
	"testing"
)

func TestRequestRoundTrip(t *testing.T) {
	t.Parallel()
	in := []Request{
		{ID: 1, Method: "POST", Target: "/v1/jobs", Body: []byte(`{"kind":"k"}`)},
		{ID: 0xFFFFFFFF, Method: "GET", Target: "/v1/jobs?queue=a&limit=2"},
		{ID: 7, Method: MethodCancel},
		{ID: 8, Method: "PATCH", Target: "/" + strings.Repeat("x", MaxTarget-1), Body: bytes.Repeat([]byte("y"), 3*eagerRead)},
	}
	var wire []byte
	for _, r := range in {
		var err error
		if wire, err = AppendRequest(wire, r); err != nil {
			t.Fatal(err)
		}
	}
	rd := bufio.NewReader(bytes.NewReader(wire))
	for _, want := range in {
		got, err := ReadRequest(rd, 1<<20)
		if err != nil {
			t.Fatalf("read %d: %v", want.ID, err)
		}
		if got.ID != want.ID || got.Method != want.Method || got.Target != want.Target || !bytes.Equal(got.Body, want.Body) {
			t.Fatalf("read %+v, want %+v", got, want)
		}
	}
	if _, err := ReadRequest(rd, 1<<20); err != io.EOF {
		t.Fatalf("after the last frame: %v, want io.EOF", err)
	}
}

func TestAnswerRoundTrip(t *testing.T) {
	t.Parallel()
	var buf bytes.Buffer
	w := bufio.NewWriter(&buf)
	in := []Answer{{ID: 3, Status: 201, Body: []byte(`{"id":"j"}` + "\n")}, {ID: 4, Status: 204}}
	for _, a := range in {
		if err := WriteAnswer(w, a); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Flush(); err != nil {
		t.Fatal(err)
	}
	appended, err := AppendAnswer(nil, in[0])
	if err != nil || !bytes.HasPrefix(buf.Bytes(), appended) {
		t.Fatalf("AppendAnswer and WriteAnswer differ: % x vs % x (%v)", appended, buf.Bytes(), err)
	}
	rd := bufio.NewReader(&buf)
	for _, want := range in {
		got, err := ReadAnswer(rd, 1<<20)
		if err != nil || got.ID != want.ID || got.Status != want.Status || !bytes.Equal(got.Body, want.Body) {
			t.Fatalf("read %+v (%v), want %+v", got, err, want)
		}
	}
	if _, err := AppendAnswer(nil, Answer{Status: 1000}); err == nil {
		t.Fatal("a 4-digit status was encoded")
	}
}

// The layout is exact: big-endian lengths, the length counting every
// byte after itself.
func TestRequestLayout(t *testing.T) {
	t.Parallel()
	got, err := AppendRequest(nil, Request{ID: 0x01020304, Method: "GET", Target: "/x", Body: []byte("{}")})
	if err != nil {
		t.Fatal(err)
	}
	want := []byte{0, 0, 0, 14, 1, 2, 3, 4, 3, 'G', 'E', 'T', 0, 2, '/', 'x', '{', '}'}
	if !bytes.Equal(got, want) {
		t.Fatalf("frame % x, want % x", got, want)
	}
	if _, err := AppendRequest(nil, Request{Method: strings.Repeat("M", MaxMethod+1)}); err == nil {
		t.Fatal("a method too long was encoded")
	}
}

func TestReadErrors(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name  string
		wire  []byte
		limit int64
		check func(error) bool
	}{
		{"shorter than its fields", []byte{0, 0, 0, 3, 0, 0, 0}, 100, func(err error) bool { return errors.Is(err, ErrMalformed) }},
		{"method past the end", []byte{0, 0, 0, 7, 0, 0, 0, 1, 9, 0, 0}, 100, func(err error) bool { return errors.Is(err, ErrMalformed) }},
		{"target past the end", []byte{0, 0, 0, 8, 0, 0, 0, 1, 1, 'G', 0, 9}, 100, func(err error) bool { return errors.Is(err, ErrMalformed) }},
		{"cut inside", []byte{0, 0, 0, 20, 0, 0, 0, 1, 3}, 100, func(err error) bool { return err == io.ErrUnexpectedEOF }},
		{"cut in the length", []byte{0, 0}, 100, func(err error) bool { return err == io.ErrUnexpectedEOF }},
		{"too long", []byte{0, 1, 0, 0, 0, 0, 0, 42}, 100, func(err error) bool {
			var tl *TooLargeError
			return errors.As(err, &tl) && tl.ID == 42 && tl.Length == 65536 && tl.Limit == 100
		}},
	} {
		_, err := ReadRequest(bufio.NewReader(bytes.NewReader(tc.wire)), tc.limit)
		if !tc.check(err) {
			t.Errorf("%s: %v", tc.name, err)
		}
	}
}

// A frame that claims a huge length but sends little costs the reader
// little: its buffer grows with what arrives. Not parallel: it measures
// the bytes allocated by the whole process.
func TestReadDoesNotTrustTheLength(t *testing.T) {
	wire := []byte{0x7F, 0xFF, 0xFF, 0xFF, 0, 0, 0, 1, 4, 'P', 'O', 'S', 'T', 0, 1, '/'}
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	_, err := ReadRequest(bufio.NewReader(bytes.NewReader(wire)), 1<<31)
	runtime.ReadMemStats(&after)
	if err != io.ErrUnexpectedEOF {
		t.Fatalf("err %v", err)
	}
	if n := after.TotalAlloc - before.TotalAlloc; n > 1<<20 {
		t.Fatalf("reading a frame that claims 2 GiB and holds 8 bytes allocated %d bytes", n)
	}
}

// FuzzReadRequest checks that any bytes either decode to requests that
// encode back to the same bytes, or fail without panicking.
func FuzzReadRequest(f *testing.F) {
	seed, _ := AppendRequest(nil, Request{ID: 9, Method: "POST", Target: "/v1/fetch", Body: []byte(`{"queues":["a"]}`)})
	f.Add(seed)
	f.Add([]byte{0, 0, 0, 7, 0, 0, 0, 1, 0, 0, 0})
	f.Add([]byte{0xFF, 0xFF, 0xFF, 0xFF, 1, 2, 3, 4})
	f.Fuzz(func(t *testing.T, wire []byte) {
		rd := bufio.NewReader(bytes.NewReader(wire))
		var again []byte
		for {
			r, err := ReadRequest(rd, 1<<16)
			if err != nil {
				return
			}
			again, err = AppendRequest(again, r)
			if err != nil {
				t.Fatalf("re-encode %+v: %v", r, err)
			}
			if !bytes.HasPrefix(wire, again) {
				t.Fatalf("re-encoded % x is not a prefix of % x", again, wire)
			}
		}
	})
}

// FrameBuffered tells a whole frame in the buffer from part of one.
func TestFrameBuffered(t *testing.T) {
	frame, err := AppendRequest(nil, Request{ID: 7, Method: "POST", Target: "/v1/jobs", Body: []byte(`{"kind":"k"}`)})
	if err != nil {
		t.Fatal(err)
	}
	for cut := 0; cut <= len(frame); cut++ {
		rd := bufio.NewReader(bytes.NewReader(frame[:cut]))
		if cut > 0 {
			_, _ = rd.Peek(cut) // fill the buffer with what there is
		}
		if got, want := FrameBuffered(rd), cut == len(frame); got != want {
			t.Fatalf("%d of %d bytes buffered: FrameBuffered %v, want %v", cut, len(frame), got, want)
		}
	}
}

// PeekRequest names the next request frame only when the buffer holds the
// whole of it, within the limit, and reads nothing.
func TestPeekRequestNamesAWholeFrameOnly(t *testing.T) {
	t.Parallel()
	frame, err := AppendRequest(nil, Request{ID: 9, Method: "POST", Target: "/v1/jobs", Body: []byte(`{"kind":"k"}`)})
	if err != nil {
		t.Fatal(err)
	}
	whole := bufio.NewReader(bytes.NewReader(frame))
	_, _ = whole.Peek(len(frame))
	if id, method, target, ok := PeekRequest(whole, 1<<20); !ok || id != 9 || method != "POST" || target != "/v1/jobs" {
		t.Fatalf("PeekRequest = %d %q %q %v, want 9 POST /v1/jobs true", id, method, target, ok)
	}
	if got, err := ReadRequest(whole, 1<<20); err != nil || got.ID != 9 || string(got.Body) != `{"kind":"k"}` {
		t.Fatalf("the frame after a peek: %+v %v, want it whole", got, err)
	}
	part := bufio.NewReader(bytes.NewReader(frame[:len(frame)-1]))
	_, _ = part.Peek(len(frame) - 1)
	if _, _, _, ok := PeekRequest(part, 1<<20); ok {
		t.Fatal("PeekRequest named a frame not wholly buffered")
	}
	if _, _, _, ok := PeekRequest(whole, 1<<20); ok {
		t.Fatal("PeekRequest named a frame in an empty buffer")
	}
	over := bufio.NewReader(bytes.NewReader(frame))
	_, _ = over.Peek(len(frame))
	if _, _, _, ok := PeekRequest(over, int64(len(frame)-5)); ok {
		t.Fatal("PeekRequest named a frame over the limit")
	}
}
