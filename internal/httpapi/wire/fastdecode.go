package wire

import (
	"strconv"
	"time"

	"github.com/spoolq/spool/internal/job"
)

// The enqueue bodies are the hot path of the API: a batch of 1,000 jobs
// costs encoding/json more CPU than the store's insert of them. The fast
// decoder reads the common shape of these bodies directly into the same
// structs. It takes no decisions of its own: on anything it does not
// handle (an escape in a string, a number with a fraction or an exponent
// where an integer goes, a null, an unknown or repeated key, a payload of
// null) it gives up, and the body goes through encoding/json and the
// exact-key check as before, which then accepts it or gives the error it
// always gave. What it accepts, it decodes to exactly what encoding/json
// would; FuzzFastDecodeMatchesEncodingJSON checks that. The body must be
// valid JSON and valid UTF-8 already (DecodeBody checks both first).

// fastDecodeEnqueue decodes a single-job enqueue body into dst, reporting
// whether it could.
func fastDecodeEnqueue(data []byte, dst *EnqueueJob) bool {
	d := fastDecoder{b: data}
	var j EnqueueJob
	if !d.enqueue(&j) || !d.end() {
		return false
	}
	*dst = j
	return true
}

// fastDecodeEnqueueBatch decodes a batch enqueue body into dst, reporting
// whether it could.
func fastDecodeEnqueueBatch(data []byte, dst *EnqueueBatch) bool {
	d := fastDecoder{b: data}
	var out EnqueueBatch
	seen := false
	ok := d.object(func(key []byte) bool {
		if string(key) != "jobs" || seen {
			return false
		}
		seen = true
		out.Jobs = []EnqueueJob{}
		return d.array(func() bool {
			out.Jobs = append(out.Jobs, EnqueueJob{})
			return d.enqueue(&out.Jobs[len(out.Jobs)-1])
		})
	})
	if !ok || !d.end() {
		return false
	}
	*dst = out
	return true
}

// fastDecoder reads valid JSON front to back; each method reports false
// for anything outside what it handles.
type fastDecoder struct {
	b []byte
	i int
}

func (d *fastDecoder) space() {
	for d.i < len(d.b) {
		switch d.b[d.i] {
		case ' ', '\t', '\n', '\r':
			d.i++
		default:
			return
		}
	}
}

// byte consumes c if it is next.
func (d *fastDecoder) byte(c byte) bool {
	if d.i < len(d.b) && d.b[d.i] == c {
		d.i++
		return true
	}
	return false
}

// end reports whether only white space is left.
func (d *fastDecoder) end() bool {
	d.space()
	return d.i == len(d.b)
}

// object reads an object, calling field with each key once the decoder
// stands on the key's value (after the colon and white space); field
// must consume the value.
func (d *fastDecoder) object(field func(key []byte) bool) bool {
	d.space()
	if !d.byte('{') {
		return false
	}
	d.space()
	if d.byte('}') {
		return true
	}
	for {
		key, ok := d.rawString()
		if !ok {
			return false
		}
		d.space()
		if !d.byte(':') {
			return false
		}
		d.space()
		if !field(key) {
			return false
		}
		d.space()
		if d.byte('}') {
			return true
		}
		if !d.byte(',') {
			return false
		}
		d.space()
	}
}

// rawString reads a string without escapes and returns its bytes.
func (d *fastDecoder) rawString() ([]byte, bool) {
	if !d.byte('"') {
		return nil, false
	}
	start := d.i
	for d.i < len(d.b) {
		switch c := d.b[d.i]; {
		case c == '"':
			s := d.b[start:d.i]
			d.i++
			return s, true
		case c == '\\' || c < 0x20:
			return nil, false
		default:
			d.i++
		}
	}
	return nil, false
}

func (d *fastDecoder) string() (string, bool) {
	s, ok := d.rawString()
	return string(s), ok
}

// number returns the literal of a number.
func (d *fastDecoder) number() ([]byte, bool) {
	start := d.i
	for d.i < len(d.b) {
		switch c := d.b[d.i]; {
		case c >= '0' && c <= '9', c == '-', c == '+', c == '.', c == 'e', c == 'E':
			d.i++
		default:
			return d.b[start:d.i], d.i > start
		}
	}
	return d.b[start:d.i], d.i > start
}

// int reads an integer literal that fits in 64 bits.
func (d *fastDecoder) int() (int64, bool) {
	lit, ok := d.number()
	if !ok {
		return 0, false
	}
	for _, c := range lit {
		if c == '.' || c == 'e' || c == 'E' || c == '+' {
			return 0, false
		}
	}
	n, err := strconv.ParseInt(string(lit), 10, 64)
	return n, err == nil
}

// float reads a number as encoding/json reads it into a float64.
func (d *fastDecoder) float() (float64, bool) {
	lit, ok := d.number()
	if !ok {
		return 0, false
	}
	f, err := strconv.ParseFloat(string(lit), 64)
	return f, err == nil
}

// value reads one value of any kind but null and returns its bytes. The
// input being valid JSON, only the ends of strings and the nesting of
// objects and arrays need tracking.
func (d *fastDecoder) value() ([]byte, bool) {
	start := d.i
	depth := 0
	for d.i < len(d.b) {
		c := d.b[d.i]
		switch {
		case c == '"':
			d.skipString()
		case c == '{' || c == '[':
			depth++
			d.i++
		case c == '}' || c == ']':
			if depth == 0 {
				return d.literal(start)
			}
			depth--
			d.i++
		case depth == 0 && (c == ',' || c == ' ' || c == '\t' || c == '\n' || c == '\r'):
			return d.literal(start)
		default:
			d.i++
		}
		if depth == 0 && d.i > start && (c == '"' || c == '}' || c == ']') {
			return d.b[start:d.i], true
		}
	}
	return d.literal(start)
}

// literal returns the bytes read since start as a value, unless they are
// null or nothing.
func (d *fastDecoder) literal(start int) ([]byte, bool) {
	v := d.b[start:d.i]
	return v, len(v) > 0 && string(v) != "null"
}

// skipString moves past the string that starts at the decoder's position.
func (d *fastDecoder) skipString() {
	d.i++
	for d.i < len(d.b) && d.b[d.i] != '"' {
		if d.b[d.i] == '\\' {
			d.i++
		}
		d.i++
	}
	d.i++
}

// enqueue reads one job of an enqueue body.
func (d *fastDecoder) enqueue(j *EnqueueJob) bool {
	var seen uint32
	once := func(bit uint32) bool {
		if seen&bit != 0 {
			return false
		}
		seen |= bit
		return true
	}
	str := func() (*string, bool) {
		s, ok := d.string()
		return &s, ok
	}
	return d.object(func(key []byte) bool {
		var ok bool
		switch string(key) {
		case "id":
			if ok = once(1 << 0); ok {
				j.ID, ok = str()
			}
		case "queue":
			if ok = once(1 << 1); ok {
				j.Queue, ok = str()
			}
		case "kind":
			if ok = once(1 << 2); ok {
				j.Kind, ok = d.string()
			}
		case "payload":
			if ok = once(1 << 3); ok {
				var raw []byte
				if raw, ok = d.value(); ok {
					j.Payload = append([]byte(nil), raw...)
				}
			}
		case "priority":
			if ok = once(1 << 4); ok {
				var n int64
				n, ok = d.int()
				j.Priority = int(n)
			}
		case "run_at":
			if ok = once(1 << 5); ok {
				start := d.i
				if _, ok = d.rawString(); ok {
					var t time.Time
					ok = t.UnmarshalJSON(d.b[start:d.i]) == nil
					j.RunAt = &t
				}
			}
		case "delay_ms":
			if ok = once(1 << 6); ok {
				j.DelayMS, ok = d.int()
			}
		case "max_attempts":
			if ok = once(1 << 7); ok {
				var n int64
				n, ok = d.int()
				m := int(n)
				j.MaxAttempts = &m
			}
		case "backoff":
			if ok = once(1 << 8); ok {
				j.Backoff = &Backoff{}
				ok = d.backoff(j.Backoff)
			}
		case "lease_ms":
			if ok = once(1 << 9); ok {
				var n int64
				n, ok = d.int()
				j.LeaseMS = &n
			}
		case "unique_key":
			if ok = once(1 << 10); ok {
				j.UniqueKey, ok = str()
			}
		case "unique_for_ms":
			if ok = once(1 << 11); ok {
				j.UniqueForMS, ok = d.int()
			}
		case "tags":
			if ok = once(1 << 12); ok {
				j.Tags, ok = d.strings()
			}
		case "durability":
			if ok = once(1 << 13); ok {
				var s string
				s, ok = d.string()
				v := job.Durability(s)
				j.Durability = &v
			}
		case "group":
			if ok = once(1 << 14); ok {
				j.Group, ok = str()
			}
		case "traceparent":
			if ok = once(1 << 15); ok {
				j.TraceParent, ok = str()
			}
		}
		return ok
	})
}

// backoff reads the backoff object of a job.
func (d *fastDecoder) backoff(b *Backoff) bool {
	var seen uint32
	return d.object(func(key []byte) bool {
		var bit uint32
		switch string(key) {
		case "type":
			bit = 1
		case "base_ms":
			bit = 2
		case "max_ms":
			bit = 4
		case "jitter":
			bit = 8
		default:
			return false
		}
		if seen&bit != 0 {
			return false
		}
		seen |= bit
		switch bit {
		case 1:
			s, ok := d.string()
			k := job.BackoffKind(s)
			b.Type = &k
			return ok
		case 2, 4:
			n, ok := d.int()
			if bit == 2 {
				b.BaseMS = &n
			} else {
				b.MaxMS = &n
			}
			return ok
		default:
			f, ok := d.float()
			b.Jitter = &f
			return ok
		}
	})
}

// strings reads an array of strings.
func (d *fastDecoder) strings() ([]string, bool) {
	out := []string{}
	ok := d.array(func() bool {
		s, ok := d.string()
		out = append(out, s)
		return ok
	})
	return out, ok
}

// array reads an array, calling elem to read each element.
func (d *fastDecoder) array(elem func() bool) bool {
	if !d.byte('[') {
		return false
	}
	d.space()
	if d.byte(']') {
		return true
	}
	for {
		if !elem() {
			return false
		}
		d.space()
		if d.byte(']') {
			return true
		}
		if !d.byte(',') {
			return false
		}
		d.space()
	}
}
