package sqlitestore

// typedef long long int sqlite3_int64;
// int spool_exec_packed(void *stmt, const unsigned char *buf, int len, int n, sqlite3_int64 *changes,
//     int *extended, char *msg, int msgLen);
import "C"

import (
	"database/sql/driver"
	"encoding/binary"
	"fmt"
	"reflect"
	"unsafe"

	"github.com/mattn/go-sqlite3"
)

// packedArgs are a statement's arguments packed into one buffer for
// spool_exec_packed (packedexec.c), which binds them all in one call from
// Go into C, where go-sqlite3 makes a call for each: a multi-row insert
// of 16 jobs binds 160 values. Each argument is a tag byte, then 8 bytes
// of an integer or a float, or 4 bytes of length and the bytes of a text
// or a blob, in the machine's byte order.
type packedArgs struct {
	buf []byte
	n   int
}

// The tags of packedArgs, as packedexec.c reads them.
const (
	argNull  = 0
	argInt   = 1
	argFloat = 2
	argText  = 3
	argBlob  = 4
)

func (p *packedArgs) reset() {
	p.buf, p.n = p.buf[:0], 0
}

// addNull packs NULL.
func (p *packedArgs) addNull() {
	p.buf = append(p.buf, argNull)
	p.n++
}

// addInt packs an integer.
func (p *packedArgs) addInt(v int64) {
	p.buf = binary.NativeEndian.AppendUint64(append(p.buf, argInt), uint64(v))
	p.n++
}

// addText packs a text.
func (p *packedArgs) addText(s string) {
	p.buf = append(binary.NativeEndian.AppendUint32(append(p.buf, argText), uint32(len(s))), s...)
	p.n++
}

// addTextOrNull packs a text, or NULL for an empty one.
func (p *packedArgs) addTextOrNull(s string) {
	if s == "" {
		p.addNull()
		return
	}
	p.addText(s)
}

// addBlob packs a blob; a nil one is NULL, as go-sqlite3 binds it.
func (p *packedArgs) addBlob(b []byte) {
	if b == nil {
		p.addNull()
		return
	}
	p.buf = append(binary.NativeEndian.AppendUint32(append(p.buf, argBlob), uint32(len(b))), b...)
	p.n++
}

// addBlobOrNull packs a blob, or NULL for an empty one.
func (p *packedArgs) addBlobOrNull(b []byte) {
	if len(b) == 0 {
		p.addNull()
		return
	}
	p.addBlob(b)
}

// addBlobOf packs the blob that fill appends to the bytes it is given,
// without a copy.
func (p *packedArgs) addBlobOf(fill func([]byte) []byte) {
	p.buf = append(p.buf, argBlob, 0, 0, 0, 0)
	start := len(p.buf)
	p.buf = fill(p.buf)
	binary.NativeEndian.PutUint32(p.buf[start-4:start], uint32(len(p.buf)-start))
	p.n++
}

// stmtHandle returns the SQLite statement that st, a statement of
// go-sqlite3, runs: the field s of its *SQLiteStmt, which go-sqlite3 does
// not export. TestPackedExecMatchesTheDriver fails should a new version
// of the driver move it.
func stmtHandle(st driver.Stmt) (unsafe.Pointer, error) {
	v := reflect.ValueOf(st)
	if v.Kind() != reflect.Pointer || v.Elem().Kind() != reflect.Struct {
		return nil, fmt.Errorf("driver statement %T is not go-sqlite3's", st)
	}
	f := v.Elem().FieldByName("s")
	if !f.IsValid() || f.Kind() != reflect.Pointer || f.IsNil() {
		return nil, fmt.Errorf("driver statement %T has no SQLite statement", st)
	}
	return f.UnsafePointer(), nil
}

// errMessageBytes bounds the message of a failed packed execution.
const errMessageBytes = 256

// packedStmt runs a go-sqlite3 statement that returns no rows with its
// arguments packed (spool_exec_packed).
type packedStmt struct {
	handle unsafe.Pointer // the SQLite statement (stmtHandle)
	args   packedArgs
	msg    [errMessageBytes]C.char // SQLite's message of a failure
}

// newPackedStmt returns the packed runner of st, a go-sqlite3 statement.
func newPackedStmt(st driver.Stmt) (*packedStmt, error) {
	h, err := stmtHandle(st)
	if err != nil {
		return nil, err
	}
	return &packedStmt{handle: h}, nil
}

// exec runs the statement with the arguments packed in p.args and
// returns the rows it changed. Its caller has the statement's connection
// to itself (inside (*sql.Conn).Raw). A failure is a sqlite3.Error with
// SQLite's codes, wrapped with SQLite's message.
func (p *packedStmt) exec() (int64, error) {
	var buf *C.uchar
	if len(p.args.buf) > 0 {
		buf = (*C.uchar)(unsafe.Pointer(&p.args.buf[0]))
	}
	var changes C.sqlite3_int64
	var extended C.int
	rc := C.spool_exec_packed(p.handle, buf, C.int(len(p.args.buf)), C.int(p.args.n), &changes, &extended,
		&p.msg[0], errMessageBytes)
	if rc != 0 {
		se := sqlite3.Error{Code: sqlite3.ErrNo(rc & 0xff), ExtendedCode: sqlite3.ErrNoExtended(extended)}
		return 0, fmt.Errorf("%s: %w", C.GoString(&p.msg[0]), se)
	}
	return int64(changes), nil
}
