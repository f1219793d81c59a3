package events

import (
	"crypto/rand"
	"encoding/binary"
	"errors"
	"strconv"
	"strings"
)

// ID names one event: the bus that published it and its number there.
// Bus is drawn at random when a bus is made, so that two runs of a server,
// or two nodes, never share one: a reader that resumes with an ID of
// another bus is told of a gap, never given the events after the same
// number of another series. The zero ID is the point before every event
// of any bus (a resume "after 0").
type ID struct {
	// Bus is the epoch of the bus: never 0 for an event.
	Bus uint64
	// Seq is the event's number on its bus, from 1 up.
	Seq uint64
}

// maxIDText bounds the text of an ID that ParseID reads.
const maxIDText = 64

// newEpoch draws the epoch of a new bus: random, never 0.
func newEpoch() uint64 {
	var b [8]byte
	for {
		_, _ = rand.Read(b[:]) // crypto/rand.Read never fails
		if e := binary.BigEndian.Uint64(b[:]); e != 0 {
			return e
		}
	}
}

// AppendText appends the text of id: the bus as 16 lower-case hex digits,
// a hyphen and the number in decimal ("7f3a9c0d12e4b7a8-1042"); "0" for
// the zero ID.
func (id ID) AppendText(b []byte) ([]byte, error) {
	if id == (ID{}) {
		return append(b, '0'), nil
	}
	const hex = "0123456789abcdef"
	for shift := 60; shift >= 0; shift -= 4 {
		b = append(b, hex[id.Bus>>uint(shift)&0xf])
	}
	b = append(b, '-')
	return strconv.AppendUint(b, id.Seq, 10), nil
}

// MarshalText implements encoding.TextMarshaler: an ID is a JSON string.
func (id ID) MarshalText() ([]byte, error) { return id.AppendText(nil) }

// String is the text of id (see AppendText).
func (id ID) String() string {
	b, _ := id.AppendText(make([]byte, 0, 32))
	return string(b)
}

// ErrBadID is the error of ParseID for a text that is not an event id.
var ErrBadID = errors.New("not an event id")

// ParseID reads the text of an ID. It also takes a bare whole number: "0"
// is the zero ID, and any other is an id of a bus that numbered its events
// without an epoch (ID.Bus 0), which is no bus's of this server.
func ParseID(s string) (ID, error) {
	if s == "" || len(s) > maxIDText {
		return ID{}, ErrBadID
	}
	bus, seq, tagged := strings.Cut(s, "-")
	if !tagged {
		n, err := parseDecimal(s)
		return ID{Seq: n}, err
	}
	if len(bus) != 16 {
		return ID{}, ErrBadID
	}
	var id ID
	for i := 0; i < len(bus); i++ {
		c := bus[i]
		var v byte
		switch {
		case '0' <= c && c <= '9':
			v = c - '0'
		case 'a' <= c && c <= 'f':
			v = c - 'a' + 10
		default:
			return ID{}, ErrBadID
		}
		id.Bus = id.Bus<<4 | uint64(v)
	}
	n, err := parseDecimal(seq)
	if err != nil || id.Bus == 0 {
		return ID{}, ErrBadID
	}
	id.Seq = n
	return id, nil
}

// parseDecimal reads a whole number of digits only (no sign).
func parseDecimal(s string) (uint64, error) {
	if s == "" || s[0] < '0' || s[0] > '9' {
		return 0, ErrBadID
	}
	n, err := strconv.ParseUint(s, 10, 64)
	if err != nil {
		return 0, ErrBadID
	}
	return n, nil
}
