// Package stream is spool-stream/1, the multiplexed transport of Spool's
// API (docs/protocol.md, "Stream transport"): one TCP connection, obtained
// by an HTTP/1.1 Upgrade of GET /v1/stream, carries many API calls at once
// as binary frames, each holding exactly the request and the answer the
// HTTP API would exchange. This package holds the frame codec, shared by
// the server (internal/httpapi/streamserver) and the clients, and the
// client side of a connection (Conn, Client). It uses only the standard
// library, so that the Go SDK pulls in nothing else.
package stream

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
)

// Protocol is the name of the protocol in the Upgrade headers.
const Protocol = "spool-stream/1"

// Path is the route that upgrades an HTTP/1.1 connection to a stream.
const Path = "/v1/stream"

// MethodCancel is the method of a cancel frame: a request frame with an
// empty target and body whose id names an earlier request of the same
// connection. The server cancels that request's context if it is still
// running and answers the cancel frame itself with nothing; the cancelled
// request still gets its answer.
const MethodCancel = "CANCEL"

// Limits of the frame layout.
const (
	// MaxMethod is the longest method a request frame can carry.
	MaxMethod = math.MaxUint8
	// MaxTarget is the longest target (path and query) a request frame
	// can carry.
	MaxTarget = math.MaxUint16
	// MaxRequestHeader is the most bytes a request frame holds after its
	// length field besides its body: id, method and target with their
	// lengths.
	MaxRequestHeader = 4 + 1 + MaxMethod + 2 + MaxTarget
	// minRequest is the fewest bytes after the length field of a request
	// frame: id and the two length fields.
	minRequest = 4 + 1 + 2
	// minAnswer is the fewest bytes after the length field of an answer
	// frame: id and status.
	minAnswer = 4 + 2
	// eagerRead is the largest frame read into a buffer of its declared
	// size at once; larger ones grow their buffer as bytes arrive, so
	// that a peer cannot make the reader allocate much by claiming a
	// length it never sends.
	eagerRead = 64 << 10
)

// Request is one API call: a request frame.
type Request struct {
	// ID is chosen by the client and echoed in the answer. No two
	// requests in flight on one connection share an id.
	ID uint32
	// Method is the HTTP method, such as "POST", or MethodCancel.
	Method string
	// Target is the path with an optional "?query", such as
	// "/v1/jobs?queue=a".
	Target string
	// Body is the JSON body; empty for none.
	Body []byte
}

// Answer is the answer of one call: an answer frame.
type Answer struct {
	// ID is the id of the request answered.
	ID uint32
	// Status is the HTTP status the route answered.
	Status int
	// Body is exactly the body the HTTP route would answer; empty for 204.
	Body []byte
}

// ErrMalformed is the error of a frame that breaks the layout: too short
// for its fields, or a field running past the frame's end. The
// connection cannot be read further.
var ErrMalformed = errors.New("malformed frame")

// TooLargeError is the error of a frame longer than the reader allows.
// The frame's id was read, so that the reader can answer it; the rest of
// the frame was not, and the connection cannot be read further.
type TooLargeError struct {
	// ID is the id of the frame.
	ID uint32
	// Length is the frame's declared length after its length field.
	Length int64
	// Limit is the largest length the reader allows.
	Limit int64
}

// Error implements error.
func (e *TooLargeError) Error() string {
	return fmt.Sprintf("frame %d is %d bytes long, more than the limit of %d", e.ID, e.Length, e.Limit)
}

// AppendRequest appends r as a request frame to dst. It fails when the
// method or target is too long for its length field or the frame too long
// for its own.
func AppendRequest(dst []byte, r Request) ([]byte, error) {
	if len(r.Method) > MaxMethod {
		return dst, fmt.Errorf("method of %d bytes: the limit is %d", len(r.Method), MaxMethod)
	}
	if len(r.Target) > MaxTarget {
		return dst, fmt.Errorf("target of %d bytes: the limit is %d", len(r.Target), MaxTarget)
	}
	n := uint64(minRequest + len(r.Method) + len(r.Target) + len(r.Body))
	if n > math.MaxUint32 {
		return dst, fmt.Errorf("request body of %d bytes does not fit a frame", len(r.Body))
	}
	dst = binary.BigEndian.AppendUint32(dst, uint32(n))
	dst = binary.BigEndian.AppendUint32(dst, r.ID)
	dst = append(dst, byte(len(r.Method)))
	dst = append(dst, r.Method...)
	dst = binary.BigEndian.AppendUint16(dst, uint16(len(r.Target)))
	dst = append(dst, r.Target...)
	return append(dst, r.Body...), nil
}

// AppendAnswer appends a as an answer frame to dst. It fails when the
// status is not a 3-digit one or the body too long for a frame.
func AppendAnswer(dst []byte, a Answer) ([]byte, error) {
	if a.Status < 100 || a.Status > 999 {
		return dst, fmt.Errorf("status %d is not an HTTP status", a.Status)
	}
	n := uint64(minAnswer + len(a.Body))
	if n > math.MaxUint32 {
		return dst, fmt.Errorf("answer body of %d bytes does not fit a frame", len(a.Body))
	}
	dst = binary.BigEndian.AppendUint32(dst, uint32(n))
	dst = binary.BigEndian.AppendUint32(dst, a.ID)
	dst = binary.BigEndian.AppendUint16(dst, uint16(a.Status))
	return append(dst, a.Body...), nil
}

// WriteAnswer writes a as an answer frame to w, its body without a copy,
// with the errors of AppendAnswer and w.
func WriteAnswer(w *bufio.Writer, a Answer) error {
	head, err := AppendAnswer(w.AvailableBuffer(), Answer{ID: a.ID, Status: a.Status})
	if err != nil {
		return err
	}
	n := uint64(minAnswer + len(a.Body))
	if n > math.MaxUint32 {
		return fmt.Errorf("answer body of %d bytes does not fit a frame", len(a.Body))
	}
	binary.BigEndian.PutUint32(head, uint32(n))
	if _, err := w.Write(head); err != nil {
		return err
	}
	_, err = w.Write(a.Body)
	return err
}

// ReadRequest reads one request frame whose length (after the length
// field) is at most limit. It returns io.EOF when the connection ends
// cleanly before a frame, io.ErrUnexpectedEOF when it ends inside one, a
// *TooLargeError for a longer frame and ErrMalformed for a broken one.
func ReadRequest(rd *bufio.Reader, limit int64) (Request, error) {
	id, rest, err := readFrame(rd, minRequest, limit)
	if err != nil {
		return Request{ID: id}, err
	}
	r := Request{ID: id}
	verb, target, body, ok := splitRequest(rest)
	if !ok {
		return r, ErrMalformed
	}
	r.Method, r.Target, r.Body = verb, string(target), body
	return r, nil
}

// splitRequest splits the rest of a request frame after its id, at least
// minRequest-4 bytes, into its method, target and body; ok is false when
// a field runs past the end.
func splitRequest(rest []byte) (verb string, target, body []byte, ok bool) {
	m := int(rest[0])
	rest = rest[1:]
	if len(rest) < m+2 {
		return "", nil, nil, false
	}
	verb, rest = method(rest[:m]), rest[m:]
	t := int(binary.BigEndian.Uint16(rest))
	rest = rest[2:]
	if len(rest) < t {
		return "", nil, nil, false
	}
	return verb, rest[:t], rest[t:], true
}

// FrameBuffered reports whether rd's buffer holds the whole of the next
// frame, so that reading it will not wait for the connection.
func FrameBuffered(rd *bufio.Reader) bool {
	if rd.Buffered() < 4 {
		return false
	}
	head, err := rd.Peek(4)
	return err == nil && int64(rd.Buffered())-4 >= int64(binary.BigEndian.Uint32(head))
}

// ReadAnswer reads one answer frame whose length (after the length field)
// is at most limit, with the errors of ReadRequest.
func ReadAnswer(rd *bufio.Reader, limit int64) (Answer, error) {
	id, rest, err := readFrame(rd, minAnswer, limit)
	if err != nil {
		return Answer{ID: id}, err
	}
	return Answer{ID: id, Status: int(binary.BigEndian.Uint16(rest)), Body: rest[2:]}, nil
}

// readFrame reads a frame's length and id, checks the length against min
// and limit, and returns the id and the rest of the frame after the id,
// which is at least min-4 bytes.
func readFrame(rd *bufio.Reader, min int, limit int64) (id uint32, rest []byte, err error) {
	var head [8]byte
	if _, err := io.ReadFull(rd, head[:4]); err != nil {
		return 0, nil, err // io.EOF between frames, io.ErrUnexpectedEOF inside one
	}
	n := int64(binary.BigEndian.Uint32(head[:4]))
	if n < int64(min) {
		return 0, nil, ErrMalformed
	}
	if _, err := io.ReadFull(rd, head[4:]); err != nil {
		return 0, nil, unexpected(err)
	}
	id = binary.BigEndian.Uint32(head[4:])
	if n > limit {
		return id, nil, &TooLargeError{ID: id, Length: n, Limit: limit}
	}
	n -= 4
	if n <= eagerRead {
		rest = make([]byte, n)
		if _, err := io.ReadFull(rd, rest); err != nil {
			return id, nil, unexpected(err)
		}
		return id, rest, nil
	}
	var buf bytes.Buffer
	if _, err := io.CopyN(&buf, rd, n); err != nil {
		return id, nil, unexpected(err)
	}
	return id, buf.Bytes(), nil
}

// unexpected turns an EOF inside a frame into io.ErrUnexpectedEOF.
func unexpected(err error) error {
	if err == io.EOF {
		return io.ErrUnexpectedEOF
	}
	return err
}

// method returns b as a string without allocating for the usual methods.
func method(b []byte) string {
	switch string(b) {
	case "GET":
		return "GET"
	case "POST":
		return "POST"
	case "DELETE":
		return "DELETE"
	case MethodCancel:
		return MethodCancel
	}
	return string(b)
}

// PeekRequest returns the id, method and target of the next request frame
// when rd's buffer holds the whole of it, its length is at most limit and
// its fields fit it; ok is false otherwise. It reads nothing.
func PeekRequest(rd *bufio.Reader, limit int64) (id uint32, verb, target string, ok bool) {
	if !FrameBuffered(rd) {
		return 0, "", "", false
	}
	head, _ := rd.Peek(4)
	n := int64(binary.BigEndian.Uint32(head))
	if n > limit || n < minRequest {
		return 0, "", "", false
	}
	b, err := rd.Peek(4 + int(n))
	if err != nil {
		return 0, "", "", false
	}
	verb, t, _, ok := splitRequest(b[8:])
	if !ok {
		return 0, "", "", false
	}
	return binary.BigEndian.Uint32(b[4:]), verb, string(t), true
}
