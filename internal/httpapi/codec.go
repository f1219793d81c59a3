package httpapi

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"strings"
	"sync"
	"time"
	"unicode/utf8"
)

// decode reads the request body, which must be exactly one JSON object of
// the shape of dst with no unknown fields. An absent or empty body decodes
// as {} when emptyOK is set.
func (a *API) decode(w http.ResponseWriter, r *http.Request, dst any, emptyOK bool) error {
	body := http.MaxBytesReader(w, r.Body, a.opts.MaxBodyBytes)
	buf := getBuffer()
	defer putBuffer(buf)
	if _, err := buf.ReadFrom(body); err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			return newError(CodePayloadTooLarge, "", "request body exceeds %d bytes", a.opts.MaxBodyBytes)
		}
		return newError(CodeInvalidJSON, "", "read request body: %v", err)
	}
	data := bytes.TrimSpace(buf.Bytes())
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
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(dst); err != nil {
		return jsonError(err)
	}
	if dec.More() {
		return newError(CodeInvalidJSON, "", "request body holds more than one JSON value")
	}
	return nil
}

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
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("Content-Length", fmt.Sprint(buf.Len()))
	w.WriteHeader(status)
	_, _ = w.Write(buf.Bytes())
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
