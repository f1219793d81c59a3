// Package wire is the JSON codec of Spool's HTTP API (docs/protocol.md,
// "Conventions"). It reads request bodies strictly: exactly one JSON
// object of valid UTF-8, no unknown, repeated or inexactly cased key, no
// null outside the caller's own JSON, and no half of a UTF-16 surrogate
// pair. It decodes the enqueue bodies, the API's hot path, with a fast
// decoder of its own that leaves everything it does not handle to
// encoding/json, and writes jobs, which fetches and listings carry by the
// hundred, with a hand-written encoder. It knows nothing of routes, auth
// or the engine; its errors say what was wrong with a body, and the API
// words them as its catalog's.
package wire

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"reflect"
	"strings"
	"sync"
	"unicode/utf8"
)

// InvalidJSONError is a request body the protocol does not take as JSON:
// not one JSON object, not valid UTF-8, an unknown, repeated or inexact
// key, a null, or a value of the wrong type. The API answers it 400
// invalid_json.
type InvalidJSONError struct {
	// Field is the wire name of the field at fault, "" when none is.
	Field string
	// Message says what is wrong, naming the field when there is one.
	Message string
}

// Error implements error.
func (e *InvalidJSONError) Error() string { return e.Message }

// invalid returns an *InvalidJSONError.
func invalid(field, format string, args ...any) *InvalidJSONError {
	return &InvalidJSONError{Field: field, Message: fmt.Sprintf(format, args...)}
}

// TooLargeError is a request body longer than the API reads. The API
// answers it 413 payload_too_large.
type TooLargeError struct {
	// Limit is the most bytes a body may have.
	Limit int64
}

// Error implements error.
func (e *TooLargeError) Error() string {
	return fmt.Sprintf("request body exceeds %d bytes", e.Limit)
}

// DecodeBody reads the body of r, at most limit bytes, which must be
// exactly one JSON object of the shape of dst with no unknown fields, into
// dst. An absent or empty body decodes as {} when emptyOK is set. Its
// errors are an *InvalidJSONError, a *TooLargeError, or a *job.InputError
// for a string holding half of a surrogate pair. w is the answer's writer,
// which http.MaxBytesReader tells to close the connection after a body
// too large.
func DecodeBody(w http.ResponseWriter, r *http.Request, limit int64, dst any, emptyOK bool) error {
	buf := getBuffer()
	defer putBuffer(buf)
	data, err := readBody(w, r, limit, buf)
	if err != nil {
		return err
	}
	if len(data) == 0 {
		if emptyOK {
			return nil
		}
		return invalid("", "request body must be a JSON object")
	}
	return DecodeJSON(data, dst)
}

// DecodeMergePatch reads the body of r, a JSON merge patch (RFC 7396),
// into dst by the rules of DecodeBody but one: a member of an object may
// be null, which dst reads as left out. It returns the paths of the null
// members ("max_wait_ms", "rate.limit"), in the body's order, for the
// caller to clear them. The media type is not checked, so a client may
// send application/merge-patch+json or application/json.
func DecodeMergePatch(w http.ResponseWriter, r *http.Request, limit int64, dst any) (nulls []string, err error) {
	buf := getBuffer()
	defer putBuffer(buf)
	data, err := readBody(w, r, limit, buf)
	if err != nil {
		return nil, err
	}
	if len(data) == 0 || data[0] != '{' {
		return nil, invalid("", "request body must be a JSON object")
	}
	if !utf8.Valid(data) {
		return nil, invalid("", "request body is not valid UTF-8")
	}
	nulls = []string{}
	if err := decodeStrictKeys(data, dst, &nulls); err != nil {
		return nil, err
	}
	return nulls, nil
}

// readBody reads the body of r, at most limit bytes, into buf and returns
// it without the white space around it.
func readBody(w http.ResponseWriter, r *http.Request, limit int64, buf *bytes.Buffer) ([]byte, error) {
	if r.ContentLength > limit {
		// Refuse before reading a byte; the server closes the connection
		// rather than drain the rest.
		return nil, &TooLargeError{Limit: limit}
	}
	body := http.MaxBytesReader(w, r.Body, limit)
	if r.ContentLength > 0 {
		buf.Grow(int(r.ContentLength) + 1) // +1: ReadFrom wants room to see EOF
	}
	if _, err := buf.ReadFrom(body); err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			return nil, &TooLargeError{Limit: limit}
		}
		return nil, invalid("", "read request body: %v", err)
	}
	return bytes.Trim(buf.Bytes(), jsonSpace), nil
}

// DecodeJSON decodes data, which must be exactly one JSON object of the
// shape of dst, by the rules of DecodeBody: valid UTF-8, no unknown,
// inexact or repeated keys, no null, no half of a surrogate pair.
func DecodeJSON(data []byte, dst any) error {
	data = bytes.Trim(data, jsonSpace)
	if len(data) == 0 || data[0] != '{' {
		return invalid("", "request body must be a JSON object")
	}
	if !utf8.Valid(data) {
		return invalid("", "request body is not valid UTF-8")
	}
	if fastDecode(data, dst) {
		return nil
	}
	return decodeStrict(data, dst)
}

// fastDecode decodes the enqueue bodies with the fast decoder when they
// are valid JSON of the shape it handles (see fastdecode.go).
func fastDecode(data []byte, dst any) bool {
	switch v := dst.(type) {
	case *EnqueueBatch:
		return json.Valid(data) && fastDecodeEnqueueBatch(data, v)
	case *EnqueueJob:
		return json.Valid(data) && fastDecodeEnqueue(data, v)
	}
	return false
}

// decodeStrict decodes data, valid UTF-8 starting with '{', into dst with
// encoding/json, refusing unknown fields, trailing data, inexact or
// repeated keys and nulls.
func decodeStrict(data []byte, dst any) error { return decodeStrictKeys(data, dst, nil) }

// decodeStrictKeys is decodeStrict, taking nulls as scanKeys does.
func decodeStrictKeys(data []byte, dst any, nulls *[]string) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(dst); err != nil {
		return jsonError(err, data, reflect.TypeOf(dst))
	}
	if dec.InputOffset() != int64(len(data)) {
		// More would miss a stray "}" or "]": data ends in no white space.
		return invalid("", "request body holds more than one JSON value")
	}
	return scanKeys(data, nulls)
}

// jsonSpace is the white space JSON allows around values.
const jsonSpace = " \t\r\n"

// jsonError turns an error of encoding/json, decoding data into a value
// of type t, into an *InvalidJSONError that names the field at fault by
// its full path where it can (see locate).
func jsonError(err error, data []byte, t reflect.Type) *InvalidJSONError {
	var syntax *json.SyntaxError
	var typ *json.UnmarshalTypeError
	switch {
	case errors.As(err, &syntax):
		return invalid("", "request body is not valid JSON at byte %d: %v", syntax.Offset, syntax)
	case errors.As(err, &typ):
		field := locate(data, t, faultAt, int(typ.Offset))
		if field == "" {
			field = typ.Field
		}
		if field == "" {
			return invalid("", "request body has a JSON %s where %s was expected", typ.Value, typeName(typ.Type.String()))
		}
		return invalid(field, "%s: must be %s, not a JSON %s", field, typeName(typ.Type.String()), typ.Value)
	case errors.Is(err, io.ErrUnexpectedEOF):
		return invalid("", "request body ends in the middle of a JSON value")
	}
	msg := err.Error()
	if name, ok := strings.CutPrefix(msg, "json: unknown field "); ok {
		name = strings.Trim(name, `"`)
		if path := locate(data, t, faultUnknown, 0); path != "" {
			name = path
		}
		return invalid(name, "unknown field %q", name)
	}
	msg = strings.TrimPrefix(msg, "json: ")
	if field := locate(data, t, faultDecode, 0); field != "" {
		return invalid(field, "%s: %s", field, msg)
	}
	return invalid("", "request body is not valid: %s", msg)
}

// typeName is a Go type as a JSON reader would call it.
func typeName(goType string) string {
	switch {
	case strings.HasPrefix(goType, "int"), strings.HasPrefix(goType, "uint"):
		return "an integer"
	case strings.HasPrefix(goType, "float"):
		return "a number"
	case goType == "string":
		return "a string"
	case goType == "bool":
		return "true or false"
	case strings.HasPrefix(goType, "[]"):
		return "an array"
	case goType == "time.Time":
		return "an RFC 3339 time string"
	}
	return "an object"
}

// bufferPool holds the buffers bodies are read into and answers written
// from, so that a busy server does not allocate one per request.
var bufferPool = sync.Pool{New: func() any { return new(bytes.Buffer) }}

// maxPooledBuffer keeps one huge request from pinning its buffer forever.
const maxPooledBuffer = 4 << 20

// getBuffer returns an empty buffer from the pool.
func getBuffer() *bytes.Buffer {
	b := bufferPool.Get().(*bytes.Buffer)
	b.Reset()
	return b
}

// putBuffer returns b to the pool, unless it grew too large to keep.
func putBuffer(b *bytes.Buffer) {
	if b.Cap() <= maxPooledBuffer {
		bufferPool.Put(b)
	}
}
