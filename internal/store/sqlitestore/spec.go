package sqlitestore

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/spoolq/spool/internal/job"
)

// The spec column packs the fields a job gets at insert that never change
// and that no query filters or sorts on, so that an insert binds and a
// read fetches fewer values (each a call from Go into SQLite); the old
// columns of these fields stay in the table, set to zeros.
//
// Version 1: the byte 1, then kind, max attempts, backoff kind, base, max,
// jitter, lease duration, unique window, creation time, durability and the
// tags: strings as a uvarint length and the bytes, integers as varints,
// the jitter as the 8 big-endian bytes of its IEEE 754 bits, the tags as a
// uvarint count and the strings. Version 2 (a dead-letter copy) adds the
// queue and id of the dead job; version 3 (a job with a traceparent) adds,
// after those (empty for a job that copies none), the traceparent. A job
// is written in the lowest version that holds it.
const (
	specVersion       = 1
	specVersionLetter = 2
	specVersionTrace  = 3
)

// errBadSpec reports a spec column this version cannot read.
var errBadSpec = errors.New("malformed spec column")

// spec is what the spec column holds.
type spec struct {
	kind        string
	maxAttempts int
	backoff     job.Backoff
	leaseFor    time.Duration
	uniqueFor   time.Duration
	createdAt   int64 // Unix nanoseconds
	durability  job.Durability
	tags        []string
	// deadLetterOf is the job a dead-letter copy copies, traceParent the
	// job's W3C traceparent; zero for none.
	deadLetterOf job.JobRef
	traceParent  string
}

// appendSpec appends the encoding of s to dst.
func appendSpec(dst []byte, s *spec) []byte {
	version := byte(specVersion)
	switch {
	case s.traceParent != "":
		version = specVersionTrace
	case !s.deadLetterOf.IsZero():
		version = specVersionLetter
	}
	dst = append(dst, version)
	dst = appendString(dst, s.kind)
	dst = binary.AppendVarint(dst, int64(s.maxAttempts))
	dst = appendString(dst, string(s.backoff.Kind))
	dst = binary.AppendVarint(dst, int64(s.backoff.Base))
	dst = binary.AppendVarint(dst, int64(s.backoff.Max))
	dst = binary.BigEndian.AppendUint64(dst, math.Float64bits(s.backoff.Jitter))
	dst = binary.AppendVarint(dst, int64(s.leaseFor))
	dst = binary.AppendVarint(dst, int64(s.uniqueFor))
	dst = binary.AppendVarint(dst, s.createdAt)
	dst = appendString(dst, string(s.durability))
	dst = binary.AppendUvarint(dst, uint64(len(s.tags)))
	for _, t := range s.tags {
		dst = appendString(dst, t)
	}
	if version >= specVersionLetter {
		dst = appendString(dst, s.deadLetterOf.Queue)
		dst = appendString(dst, s.deadLetterOf.ID)
	}
	if version == specVersionTrace {
		dst = appendString(dst, s.traceParent)
	}
	return dst
}

func appendString(dst []byte, s string) []byte {
	dst = binary.AppendUvarint(dst, uint64(len(s)))
	return append(dst, s...)
}

// decodeSpec fills the spec fields of j from b.
func decodeSpec(b []byte, j *job.Job) error {
	d := specDecoder{b: b}
	version := d.byte()
	if version != specVersion && version != specVersionLetter && version != specVersionTrace {
		if d.err != nil {
			return d.err
		}
		return fmt.Errorf("%w: version %d", errBadSpec, version)
	}
	j.Kind = d.string()
	j.MaxAttempts = int(d.varint())
	j.Backoff.Kind = job.BackoffKind(d.string())
	j.Backoff.Base = time.Duration(d.varint())
	j.Backoff.Max = time.Duration(d.varint())
	j.Backoff.Jitter = math.Float64frombits(d.uint64())
	j.LeaseDuration = time.Duration(d.varint())
	j.UniqueFor = time.Duration(d.varint())
	j.CreatedAt = time.Unix(0, d.varint()).UTC()
	j.Durability = job.Durability(d.string())
	if n := d.uvarint(); n > 0 && d.err == nil {
		if n > uint64(len(d.b)) { // each tag takes at least a byte
			return fmt.Errorf("%w: %d tags in %d bytes", errBadSpec, n, len(d.b))
		}
		j.Tags = make([]string, n)
		for i := range j.Tags {
			j.Tags[i] = d.string()
		}
	}
	if version >= specVersionLetter {
		j.DeadLetterOf.Queue = d.string()
		j.DeadLetterOf.ID = d.string()
	}
	if version == specVersionTrace {
		j.TraceParent = d.string()
	}
	if d.err == nil && len(d.b) > 0 {
		d.err = fmt.Errorf("%w: %d bytes after the end", errBadSpec, len(d.b))
	}
	return d.err
}

// specDecoder reads a spec front to back; the first error sticks and the
// reads after it return zeros.
type specDecoder struct {
	b   []byte
	err error
}

func (d *specDecoder) fail(what string) {
	if d.err == nil {
		d.err = fmt.Errorf("%w: truncated %s", errBadSpec, what)
	}
	d.b = nil
}

// skip drops the n bytes read, n <= 0 meaning a malformed what.
func (d *specDecoder) skip(n int, what string) {
	if n <= 0 || n > len(d.b) {
		d.fail(what)
		return
	}
	d.b = d.b[n:]
}

func (d *specDecoder) byte() (v byte) {
	if len(d.b) > 0 {
		v = d.b[0]
	}
	d.skip(1, "version")
	return v
}

func (d *specDecoder) uvarint() uint64 {
	v, n := binary.Uvarint(d.b)
	d.skip(n, "number")
	return v
}

func (d *specDecoder) varint() int64 {
	v, n := binary.Varint(d.b)
	d.skip(n, "number")
	return v
}

func (d *specDecoder) uint64() (v uint64) {
	if len(d.b) >= 8 {
		v = binary.BigEndian.Uint64(d.b)
	}
	d.skip(8, "float")
	return v
}

func (d *specDecoder) string() string {
	n := d.uvarint()
	if d.err != nil || n == 0 {
		return ""
	}
	if n > uint64(len(d.b)) {
		d.fail("string")
		return ""
	}
	s := string(d.b[:n])
	d.b = d.b[n:]
	return s
}
