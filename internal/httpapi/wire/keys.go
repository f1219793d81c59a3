package wire

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"

	"github.com/spoolq/spool/internal/job"
)

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
func exactKeys(data []byte) error { return scanKeys(data, nil) }

// scanKeys is exactKeys, except that with nulls set it takes a null
// outside arrays and appends its field's path ("max_wait_ms",
// "rate.limit") to *nulls, as the members of a merge patch may be null.
func scanKeys(data []byte, nulls *[]string) error {
	type frame = keyFrame
	var key []byte    // the field being read, for errors
	var stack []frame // the open objects and arrays
	var keys [][]byte // the keys of the open objects, innermost last
	for i := 0; i < len(data); {
		switch data[i] {
		case '"':
		case 'n': // outside strings, only null has an n
			field := fieldPath(stack, key)
			if n := len(stack); nulls != nil && n > 0 && !stack[n-1].array {
				*nulls = append(*nulls, field)
				i += len("null")
				continue
			}
			return invalid(field, "%s: must not be null; leave the field out instead", field)
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
				return job.Invalid(fieldPath(stack, key), "must be valid Unicode: it holds half of a UTF-16 surrogate pair (an escape \\ud800-\\udfff without its other half)")
			}
			i = end
			continue
		}
		key = data[i+1 : end-1]
		if bytes.IndexByte(key, '\\') >= 0 {
			var unquoted string
			if err := json.Unmarshal(data[i:end], &unquoted); err != nil {
				return invalid("", "request body holds a malformed key")
			}
			key = []byte(unquoted)
		}
		if n := len(stack); n > 0 {
			for _, k := range keys[stack[n-1].firstKey:] {
				if bytes.Equal(k, key) {
					field := fieldPath(stack, key)
					return invalid(field, "%s: given twice", field)
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
				field := fieldPath(stack, key)
				return invalid(field, "unknown field %q", field)
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
