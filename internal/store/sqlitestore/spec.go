package sqlitestore

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/spoolq/spool/internal/job"
)

// The spec column packs the fields a job is given at insert and that never
// change afterwards, and that no query filters or sorts on: kind, max
// attempts, backoff, lease duration, unique window, tags, creation time
// and durability. An insert then binds 9 values instead of 19 and a read
// fetches 18 columns instead of 28; each value costs a call from Go into
// SQLite, as much as SQLite's own work for the row. (The columns these
// fields had before schema version 3 stay in the table, set to zeros.)
//
// Format, version 1: the byte 1, then kind, max attempts, backoff kind,
// base, max, jitter, lease duration, unique window, creation time,
// durability and the tags. Strings are a uvarint length and the bytes,
// integers varints, the jitter the 8 bytes of its IEEE 754 bits (big
// endian), the tags a uvarint count and that many strings.
//
// Version 2, for a dead-letter copy (see job.DeadLetter): the byte 2,
// the fields of version 1, then the queue and the id of the dead job it
// copies, as strings. Every other job keeps version 1, which this
// version reads as before.
//
// Version 3, for a job with a traceparent (job.Job.TraceParent): the
// byte 3, the fields of version 2 (the dead job's queue and id empty for
// a job that copies none), then the traceparent as a string. The jobs
// without one keep version 1 or 2, so their rows are unchanged.
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
	// deadLetterOf is the dead job a dead-letter copy copies; zero for
	// other jobs.
	deadLetterOf job.JobRef
	// traceParent is the job's W3C traceparent; empty for none.
	traceParent string
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

func (d *specDecoder) byte() byte {
	if len(d.b) < 1 {
		d.fail("version")
		return 0
	}
	v := d.b[0]
	d.b = d.b[1:]
	return v
}

func (d *specDecoder) uvarint() uint64 {
	v, n := binary.Uvarint(d.b)
	if n <= 0 {
		d.fail("number")
		return 0
	}
	d.b = d.b[n:]
	return v
}

func (d *specDecoder) varint() int64 {
	v, n := binary.Varint(d.b)
	if n <= 0 {
		d.fail("number")
		return 0
	}
	d.b = d.b[n:]
	return v
}

func (d *specDecoder) uint64() uint64 {
	if len(d.b) < 8 {
		d.fail("float")
		return 0
	}
	v := binary.BigEndian.Uint64(d.b)
	d.b = d.b[8:]
	return v
}

func (d *specDecoder) string() string {
	n := d.uvarint()
	if d.err != nil {
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
