package httpapi

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/spoolq/spool/internal/job"
)

// decode reads the request body, which must be exactly one JSON object of
// the shape of dst with no unknown fields. An absent or empty body decodes
// as {} when emptyOK is set.
func (a *API) decode(w http.ResponseWriter, r *http.Request, dst any, emptyOK bool) error {
	if r.ContentLength > a.opts.MaxBodyBytes {
		// Refuse before reading a byte; the server closes the connection
		// rather than drain the rest.
		return newError(CodePayloadTooLarge, "", "request body exceeds %d bytes", a.opts.MaxBodyBytes)
	}
	body := http.MaxBytesReader(w, r.Body, a.opts.MaxBodyBytes)
	buf := getBuffer()
	defer putBuffer(buf)
	if r.ContentLength > 0 {
		buf.Grow(int(r.ContentLength) + 1) // +1: ReadFrom wants room to see EOF
	}
	if _, err := buf.ReadFrom(body); err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			return newError(CodePayloadTooLarge, "", "request body exceeds %d bytes", a.opts.MaxBodyBytes)
		}
		return newError(CodeInvalidJSON, "", "read request body: %v", err)
	}
	data := bytes.Trim(buf.Bytes(), jsonSpace)
	if len(data) == 0 {
		if emptyOK {
			return nil
		}
		return newError(CodeInvalidJSON, "", "request body must be a JSON object")
	}
	if data[0] != '{' {
		return newError(CodeInvalidJSON, "", "request body must be a JSON object")
	}
	if !utf8.Valid(data) {
		return newError(CodeInvalidJSON, "", "request body is not valid UTF-8")
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
	case *enqueueBatchJSON:
		return json.Valid(data) && fastDecodeEnqueueBatch(data, v)
	case *enqueueJSON:
		return json.Valid(data) && fastDecodeEnqueue(data, v)
	}
	return false
}

// decodeStrict decodes data, valid UTF-8 starting with '{', into dst with
// encoding/json, refusing unknown fields, trailing data, inexact or
// repeated keys and nulls.
func decodeStrict(data []byte, dst any) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(dst); err != nil {
		return jsonError(err)
	}
	if dec.InputOffset() != int64(len(data)) {
		// More would miss a stray "}" or "]": data ends in no white space.
		return newError(CodeInvalidJSON, "", "request body holds more than one JSON value")
	}
	return exactKeys(data)
}

// isFreeField reports whether key names a field whose value is the
// caller's own JSON, where any key and null go: payload, result, progress.
func isFreeField(key []byte) bool {
	switch string(key) {
	case "payload", "result", "progress":
		return true
	}
	return false
}

// exactKeys fails on the first object key, outside the free fields, that
// is not exactly a field name or repeats a key of its object, and on the
// first null outside them. encoding/json matches field names regardless of
// case ("Kind", or "\u212aind" with a Kelvin sign, would fill kind), lets
// a repeated key overwrite the first, and reads null as "leave the field
// alone"; the protocol does none of these. Every field name is lower case,
// so a key that survived decoding with DisallowUnknownFields is exact when
// it is lower case. data must be valid JSON. The scan allocates only for
// nesting and escaped keys.
func exactKeys(data []byte) error {
	type frame = keyFrame
	var key []byte    // the field being read, for errors
	var stack []frame // the open objects and arrays
	var keys [][]byte // the keys of the open objects, innermost last
	for i := 0; i < len(data); {
		switch data[i] {
		case '"':
		case 'n': // outside strings, only null has an n
			return newError(CodeInvalidJSON, string(key), "%s: must not be null; leave the field out instead", key)
		case '{', '[':
			stack = append(stack, frame{field: key, firstKey: len(keys), array: data[i] == '['})
			i++
			continue
		case ',':
			if n := len(stack); n > 0 && stack[n-1].array {
				stack[n-1].index++
			}
			i++
			continue
		case '}', ']':
			if n := len(stack); n > 0 {
				top := stack[n-1]
				key, keys, stack = top.field, keys[:top.firstKey], stack[:n-1]
			}
			i++
			continue
		default:
			i++
			continue
		}
		end := skipString(data, i)
		colon := skipSpace(data, end)
		if colon >= len(data) || data[colon] != ':' {
			// A string value. encoding/json reads half of a UTF-16
			// surrogate pair as U+FFFD, so that two different keys would
			// become one: refuse it.
			// A failed attempt's error is free text, kept with U+FFFD.
			if bytes.IndexByte(data[i:end], '\\') >= 0 && string(key) != "error" && loneSurrogate(data[i:end]) {
				field := fieldPath(stack, key)
				return newError(CodeInvalidArgument, field, "%s: must be valid Unicode: it holds half of a UTF-16 surrogate pair (an escape \\ud800-\\udfff without its other half)", field)
			}
			i = end
			continue
		}
		key = data[i+1 : end-1]
		if bytes.IndexByte(key, '\\') >= 0 {
			var unquoted string
			if err := json.Unmarshal(data[i:end], &unquoted); err != nil {
				return newError(CodeInvalidJSON, "", "request body holds a malformed key")
			}
			key = []byte(unquoted)
		}
		if n := len(stack); n > 0 {
			for _, k := range keys[stack[n-1].firstKey:] {
				if bytes.Equal(k, key) {
					return newError(CodeInvalidJSON, string(key), "%s: given twice", key)
				}
			}
			keys = append(keys, key)
		}
		if isFreeField(key) {
			i = skipValue(data, skipSpace(data, colon+1))
			continue
		}
		for _, c := range key {
			if (c < 'a' || c > 'z') && c != '_' {
				return newError(CodeInvalidJSON, string(key), "unknown field %q", key)
			}
		}
		i = colon + 1
	}
	return nil
}

// keyFrame is an object or array open at some point of exactKeys' scan.
type keyFrame struct {
	field    []byte // the key the object or array is the value of
	firstKey int    // where the object's keys start in keys
	array    bool   // an array, whose element index counts its commas
	index    int
}

// fieldPath names the value being read, in the wire form of field names:
// "jobs[3].unique_key", "tags[1]". key is the key of the innermost object.
func fieldPath(stack []keyFrame, key []byte) string {
	var b strings.Builder
	step := func(parent keyFrame, name []byte) {
		if parent.array {
			fmt.Fprintf(&b, "[%d]", parent.index)
			return
		}
		if b.Len() > 0 {
			b.WriteByte('.')
		}
		b.Write(name)
	}
	for k := 1; k < len(stack); k++ {
		step(stack[k-1], stack[k].field)
	}
	if n := len(stack); n > 0 {
		step(stack[n-1], key)
	}
	return b.String()
}

// loneSurrogate reports whether the JSON string s (with its quotes)
// escapes half of a UTF-16 surrogate pair without the other half.
func loneSurrogate(s []byte) bool {
	hex4 := func(i int) (rune, bool) {
		if i+6 > len(s) || s[i] != '\\' || s[i+1] != 'u' {
			return 0, false
		}
		v, err := strconv.ParseUint(string(s[i+2:i+6]), 16, 32)
		return rune(v), err == nil
	}
	for i := 0; i < len(s); i++ {
		if s[i] != '\\' {
			continue
		}
		r, ok := hex4(i)
		if !ok {
			i++ // a one-character escape
			continue
		}
		switch {
		case r >= 0xDC00 && r < 0xE000:
			return true // a low half first
		case r >= 0xD800 && r < 0xDC00:
			low, ok := hex4(i + 6)
			if !ok || low < 0xDC00 || low >= 0xE000 {
				return true
			}
			i += 11
		default:
			i += 5
		}
	}
	return false
}

// skipString returns the index just past the string that starts at i.
func skipString(data []byte, i int) int {
	for i++; i < len(data); i++ {
		switch data[i] {
		case '\\':
			i++
		case '"':
			return i + 1
		}
	}
	return len(data)
}

func skipSpace(data []byte, i int) int {
	for i < len(data) && (data[i] == ' ' || data[i] == '\t' || data[i] == '\n' || data[i] == '\r') {
		i++
	}
	return i
}

// skipValue returns the index just past the JSON value that starts at i.
func skipValue(data []byte, i int) int {
	depth := 0
	for i < len(data) {
		switch data[i] {
		case '"':
			i = skipString(data, i)
			if depth == 0 {
				return i
			}
			continue
		case '{', '[':
			depth++
		case '}', ']':
			if depth == 0 {
				return i
			}
			depth--
			if depth == 0 {
				return i + 1
			}
		case ',':
			if depth == 0 {
				return i
			}
		}
		i++
	}
	return i
}

// jsonSpace is the white space JSON allows around values.
const jsonSpace = " \t\r\n"

// jsonError turns a decoding error into an invalid_json answer naming the
// field where it can.
func jsonError(err error) *apiError {
	var syntax *json.SyntaxError
	var typ *json.UnmarshalTypeError
	switch {
	case errors.As(err, &syntax):
		return newError(CodeInvalidJSON, "", "request body is not valid JSON at byte %d: %v", syntax.Offset, syntax)
	case errors.As(err, &typ):
		field := typ.Field
		if field == "" {
			return newError(CodeInvalidJSON, "", "request body has a JSON %s where %s was expected", typ.Value, typeName(typ.Type.String()))
		}
		return newError(CodeInvalidJSON, field, "%s: must be %s, not a JSON %s", field, typeName(typ.Type.String()), typ.Value)
	case errors.Is(err, io.ErrUnexpectedEOF):
		return newError(CodeInvalidJSON, "", "request body ends in the middle of a JSON value")
	}
	msg := err.Error()
	if name, ok := strings.CutPrefix(msg, "json: unknown field "); ok {
		name = strings.Trim(name, `"`)
		return newError(CodeInvalidJSON, name, "unknown field %q", name)
	}
	return newError(CodeInvalidJSON, "", "request body is not valid: %s", strings.TrimPrefix(msg, "json: "))
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

var bufferPool = sync.Pool{New: func() any { return new(bytes.Buffer) }}

// maxPooledBuffer keeps one huge request from pinning its buffer forever.
const maxPooledBuffer = 4 << 20

func getBuffer() *bytes.Buffer {
	b := bufferPool.Get().(*bytes.Buffer)
	b.Reset()
	return b
}

func putBuffer(b *bytes.Buffer) {
	if b.Cap() <= maxPooledBuffer {
		bufferPool.Put(b)
	}
}

// writeJSON answers status with v as JSON.
func (a *API) writeJSON(w http.ResponseWriter, status int, v any) {
	buf := getBuffer()
	defer putBuffer(buf)
	if err := json.NewEncoder(buf).Encode(v); err != nil {
		a.opts.Logger.Error("encode answer", "err", err)
		a.writeError(w, nil, newError(CodeInternal, "", "internal server error"))
		return
	}
	writeBody(w, status, buf.Bytes())
}

// writeBody answers status with body, which is JSON.
func writeBody(w http.ResponseWriter, status int, body []byte) {
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("Content-Length", strconv.Itoa(len(body)))
	w.WriteHeader(status)
	_, _ = w.Write(body)
}

// writeJobs answers 200 with {"jobs": [...]} and, when next is set,
// "next_cursor".
func writeJobs(w http.ResponseWriter, jobs []*job.Job, next string) {
	buf := getBuffer()
	defer putBuffer(buf)
	b := append(buf.AvailableBuffer(), `{"jobs":`...)
	b = appendJobs(b, jobs)
	if next != "" {
		b = append(b, `,"next_cursor":`...)
		b = appendString(b, next)
	}
	b = append(b, "}\n"...)
	buf.Write(b)
	writeBody(w, http.StatusOK, buf.Bytes())
}

// writeJob answers 200 with one job.
func writeJob(w http.ResponseWriter, j *job.Job) {
	buf := getBuffer()
	defer putBuffer(buf)
	b := appendJob(buf.AvailableBuffer(), j)
	buf.Write(append(b, '\n'))
	writeBody(w, http.StatusOK, buf.Bytes())
}

// writeError answers err: a catalog error as it is, anything else through
// classify. Internal errors are logged with detail and answered without it.
func (a *API) writeError(w http.ResponseWriter, r *http.Request, err error) {
	e, internal := classify(err)
	if internal {
		method, path := "", ""
		if r != nil {
			method, path = r.Method, r.URL.Path
		}
		a.opts.Logger.Error("request failed", "method", method, "path", path, "code", e.Code, "err", err)
	}
	status := e.Status()
	if status == 0 {
		status = http.StatusInternalServerError
	}
	if e.Code == CodeUnavailable || e.Code == CodeStorageFull {
		w.Header().Set("Retry-After", "1")
	}
	a.writeJSON(w, status, errorBody{Error: *e})
}

// millis turns wire milliseconds into a duration, saturating instead of
// overflowing so that absurd values fail validation rather than wrap.
func millis(ms int64) time.Duration {
	const limit = math.MaxInt64 / int64(time.Millisecond)
	switch {
	case ms > limit:
		return math.MaxInt64
	case ms < -limit:
		return math.MinInt64
	}
	return time.Duration(ms) * time.Millisecond
}

// toMillis is d in whole milliseconds, for the wire.
func toMillis(d time.Duration) int64 { return d.Milliseconds() }
