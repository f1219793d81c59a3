package wire

import (
	"encoding"
	"encoding/json"
	"reflect"
	"strconv"
	"strings"
)

// The errors of encoding/json name a nested field poorly: an unknown key
// by its own name only ("x", not "rate.x"), a value of the wrong type by
// a dotted path without the indexes of arrays ("jobs.kind", not
// "jobs[1].kind"), and a value that failed to decode itself (a time) not
// at all. locate finds the field at fault by walking the body along the
// type it decodes into, so that every error names the field by its full
// path, in the wire form of fieldPath.

// fault is what locate looks for.
type fault int

const (
	// faultUnknown is the first key that no field of the struct holding
	// it matches, as encoding/json matches keys (exactly, else regardless
	// of case).
	faultUnknown fault = iota
	// faultDecode is the first value of a type that decodes itself
	// (json.Unmarshaler, encoding.TextUnmarshaler) and fails to.
	faultDecode
	// faultAt is the value that ends at locator.offset, or whose object
	// or array opens just before it: where encoding/json reports a value
	// of the wrong type.
	faultAt
)

var (
	jsonUnmarshaler = reflect.TypeFor[json.Unmarshaler]()
	textUnmarshaler = reflect.TypeFor[encoding.TextUnmarshaler]()
)

// locator walks a body, valid JSON, along the type it decodes into.
type locator struct {
	data   []byte
	want   fault
	offset int
	path   []string // the steps to the value being read: ".key" or "[3]"
}

// locate returns the path of the first fault of kind want in data, read
// into a value of type t; offset is faultAt's. It returns "" when it
// finds none.
func locate(data []byte, t reflect.Type, want fault, offset int) string {
	l := &locator{data: data, want: want, offset: offset}
	if _, found := l.value(0, t); !found {
		return ""
	}
	return strings.TrimPrefix(strings.Join(l.path, ""), ".")
}

// value reads the JSON value at or after i, of Go type t (nil when not
// known: free JSON, an interface), and returns the index past it and
// whether the fault lies in it, l.path then leading to the fault.
func (l *locator) value(i int, t reflect.Type) (int, bool) {
	if i = skipSpace(l.data, i); i >= len(l.data) {
		return i, false
	}
	for t != nil && t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t != nil && decodesItself(t) {
		end := skipValue(l.data, i)
		switch l.want {
		case faultDecode:
			return end, json.Unmarshal(l.data[i:end], reflect.New(t).Interface()) != nil
		case faultAt:
			return end, l.offset > i && l.offset <= end
		}
		return end, false
	}
	switch l.data[i] {
	case '{':
		if l.want == faultAt && l.offset == i+1 {
			return i + 1, true
		}
		return l.object(i+1, t)
	case '[':
		if l.want == faultAt && l.offset == i+1 {
			return i + 1, true
		}
		return l.array(i+1, t)
	case '"':
		end := skipString(l.data, i)
		return end, l.want == faultAt && l.offset == end
	}
	end := i
	for end < len(l.data) && !strings.ContainsRune(",}] \t\r\n", rune(l.data[end])) {
		end++
	}
	return end, l.want == faultAt && l.offset == end
}

// object reads the members of an object from i, just past its '{'.
func (l *locator) object(i int, t reflect.Type) (int, bool) {
	for {
		i = skipSpace(l.data, i)
		if i >= len(l.data) || l.data[i] == '}' {
			return i + 1, false
		}
		end := skipString(l.data, i)
		var key string
		if err := json.Unmarshal(l.data[i:end], &key); err != nil {
			return len(l.data), false
		}
		i = skipSpace(l.data, end) + 1 // past the colon
		child, known := member(t, key)
		l.path = append(l.path, "."+key)
		if !known && l.want == faultUnknown {
			return i, true
		}
		var found bool
		if i, found = l.value(i, child); found {
			return i, true
		}
		l.path = l.path[:len(l.path)-1]
		if i = skipSpace(l.data, i); i < len(l.data) && l.data[i] == ',' {
			i++
		}
	}
}

// array reads the elements of an array from i, just past its '['.
func (l *locator) array(i int, t reflect.Type) (int, bool) {
	var elem reflect.Type
	if t != nil && (t.Kind() == reflect.Slice || t.Kind() == reflect.Array) {
		elem = t.Elem()
	}
	for n := 0; ; n++ {
		i = skipSpace(l.data, i)
		if i >= len(l.data) || l.data[i] == ']' {
			return i + 1, false
		}
		l.path = append(l.path, "["+strconv.Itoa(n)+"]")
		var found bool
		if i, found = l.value(i, elem); found {
			return i, true
		}
		l.path = l.path[:len(l.path)-1]
		if i = skipSpace(l.data, i); i < len(l.data) && l.data[i] == ',' {
			i++
		}
	}
}

// member returns the type of key's value in an object of type t, and
// whether t has such a member: a struct only the fields encoding/json
// fills (exported, by their JSON names), anything else every key.
func member(t reflect.Type, key string) (reflect.Type, bool) {
	switch {
	case t == nil:
		return nil, true
	case t.Kind() == reflect.Map:
		return t.Elem(), true
	case t.Kind() != reflect.Struct:
		return nil, true
	}
	var folded reflect.Type
	for _, f := range reflect.VisibleFields(t) {
		name, ok := jsonName(f)
		switch {
		case !ok:
		case name == key:
			return f.Type, true
		case folded == nil && strings.EqualFold(name, key):
			folded = f.Type
		}
	}
	return folded, folded != nil
}

// jsonName is the key encoding/json reads field f from, and whether it
// reads f at all.
func jsonName(f reflect.StructField) (string, bool) {
	if !f.IsExported() {
		return "", false
	}
	tag := f.Tag.Get("json")
	if tag == "-" {
		return "", false
	}
	name, _, _ := strings.Cut(tag, ",")
	if f.Anonymous && name == "" {
		t := f.Type
		if t.Kind() == reflect.Pointer {
			t = t.Elem()
		}
		if t.Kind() == reflect.Struct {
			return "", false // its fields are promoted
		}
	}
	if name == "" {
		name = f.Name
	}
	return name, true
}

// decodesItself reports whether values of t decode themselves.
func decodesItself(t reflect.Type) bool {
	p := reflect.PointerTo(t)
	return t.Implements(jsonUnmarshaler) || p.Implements(jsonUnmarshaler) ||
		t.Implements(textUnmarshaler) || p.Implements(textUnmarshaler)
}
