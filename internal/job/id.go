package job

import (
	"crypto/rand"
	"encoding/binary"
	"time"
)

// crockford is the Crockford base32 alphabet: sortable, no I, L, O or U.
const crockford = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"

// NewID returns a new 26-character job id: 48 bits of milliseconds since the
// Unix epoch then 80 random bits, in Crockford base32, so ids sort by
// creation time and never collide in practice, across nodes too.
func NewID(now time.Time) string {
	var raw [16]byte
	binary.BigEndian.PutUint64(raw[0:8], uint64(now.UnixMilli())<<16)
	if _, err := rand.Read(raw[6:]); err != nil {
		panic("read random bytes: " + err.Error()) // crypto/rand never fails on supported platforms
	}
	hi := binary.BigEndian.Uint64(raw[0:8])
	lo := binary.BigEndian.Uint64(raw[8:16])
	var out [26]byte
	// 128 bits as 26 base32 digits (130 bits, the top two always zero).
	for i := 25; i >= 0; i-- {
		out[i] = crockford[lo&31]
		lo = lo>>5 | hi<<59
		hi >>= 5
	}
	return string(out[:])
}

// Limits on names, checked at the edge.
const (
	// MaxNameLength bounds queue names, kinds, job ids, unique keys and tags.
	MaxNameLength = 128
	// MaxTags bounds the number of tags on one job.
	MaxTags = 32
)

// ValidName reports whether s may be used as a queue name, kind or job id:
// 1 to MaxNameLength characters of letters, digits and "_.:-", starting with
// a letter or digit.
func ValidName(s string) bool {
	if len(s) == 0 || len(s) > MaxNameLength {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9':
		case i > 0 && (c == '_' || c == '.' || c == ':' || c == '-'):
		default:
			return false
		}
	}
	return true
}
