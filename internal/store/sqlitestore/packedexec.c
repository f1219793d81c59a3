// Packed execution: runs a prepared statement with all of its arguments
// in one call from Go (see packedexec.go), where binding them one by one
// costs a call from Go into C each. The declarations below are those of
// sqlite3.h (public domain) that it needs; the SQLite it links with is the
// one github.com/mattn/go-sqlite3 builds into the binary.

#include <string.h>

typedef long long int sqlite3_int64;
typedef struct sqlite3 sqlite3;
typedef struct sqlite3_stmt sqlite3_stmt;

extern int sqlite3_reset(sqlite3_stmt *);
extern int sqlite3_clear_bindings(sqlite3_stmt *);
extern int sqlite3_bind_null(sqlite3_stmt *, int);
extern int sqlite3_bind_int64(sqlite3_stmt *, int, sqlite3_int64);
extern int sqlite3_bind_double(sqlite3_stmt *, int, double);
extern int sqlite3_bind_text(sqlite3_stmt *, int, const char *, int, void (*)(void *));
extern int sqlite3_bind_blob(sqlite3_stmt *, int, const void *, int, void (*)(void *));
extern int sqlite3_step(sqlite3_stmt *);
extern sqlite3 *sqlite3_db_handle(sqlite3_stmt *);
extern sqlite3_int64 sqlite3_changes64(sqlite3 *);
extern int sqlite3_extended_errcode(sqlite3 *);
extern const char *sqlite3_errmsg(sqlite3 *);

#define SQLITE_OK 0
#define SQLITE_MISUSE 21
#define SQLITE_ROW 100
#define SQLITE_DONE 101
// SQLITE_STATIC: SQLite reads the bytes where they are, which is safe
// because the bindings are cleared before spool_exec_packed returns.
#define SQLITE_STATIC ((void (*)(void *))0)

// The tags of packed arguments (packedArgs in packedexec.go).
enum { argNull = 0, argInt = 1, argFloat = 2, argText = 3, argBlob = 4 };

static sqlite3_int64 readInt64(const unsigned char *p) {
	sqlite3_int64 v;
	memcpy(&v, p, 8);
	return v;
}

static int readLength(const unsigned char *p) {
	unsigned int n;
	memcpy(&n, p, 4);
	return (int)n;
}

// bindPacked binds the n arguments packed in buf[0:len] to stmt; it
// returns SQLITE_OK or an error code, SQLITE_MISUSE for a malformed
// buffer.
static int bindPacked(sqlite3_stmt *stmt, const unsigned char *buf, int len, int n) {
	int at = 0;
	for (int i = 1; i <= n; i++) {
		if (at >= len) {
			return SQLITE_MISUSE;
		}
		int rc, size;
		unsigned char tag = buf[at++];
		switch (tag) {
		case argNull:
			rc = sqlite3_bind_null(stmt, i);
			break;
		case argInt:
		case argFloat:
			if (len - at < 8) {
				return SQLITE_MISUSE;
			}
			if (tag == argInt) {
				rc = sqlite3_bind_int64(stmt, i, readInt64(buf + at));
			} else {
				double d;
				memcpy(&d, buf + at, 8);
				rc = sqlite3_bind_double(stmt, i, d);
			}
			at += 8;
			break;
		case argText:
		case argBlob:
			if (len - at < 4) {
				return SQLITE_MISUSE;
			}
			size = readLength(buf + at);
			at += 4;
			if (size < 0 || len - at < size) {
				return SQLITE_MISUSE;
			}
			if (tag == argText) {
				rc = sqlite3_bind_text(stmt, i, (const char *)buf + at, size, SQLITE_STATIC);
			} else {
				rc = sqlite3_bind_blob(stmt, i, buf + at, size, SQLITE_STATIC);
			}
			at += size;
			break;
		default:
			return SQLITE_MISUSE;
		}
		if (rc != SQLITE_OK) {
			return rc;
		}
	}
	return at == len ? SQLITE_OK : SQLITE_MISUSE;
}

// spool_exec_packed runs stmt, which returns no rows, with the n
// arguments packed in buf[0:len], and sets *changes to the rows it
// changed. It returns SQLITE_OK, or the error code of the bind or the
// step that failed, with the extended code in *extended and SQLite's
// message in msg (at most msgLen bytes with its NUL). The statement is
// left reset, without bindings.
int spool_exec_packed(void *p, const unsigned char *buf, int len, int n, sqlite3_int64 *changes,
		int *extended, char *msg, int msgLen) {
	sqlite3_stmt *stmt = (sqlite3_stmt *)p;
	sqlite3 *db = sqlite3_db_handle(stmt);
	sqlite3_reset(stmt);
	int rc = bindPacked(stmt, buf, len, n);
	if (rc == SQLITE_OK) {
		rc = sqlite3_step(stmt);
		if (rc == SQLITE_DONE) {
			*changes = sqlite3_changes64(db);
			rc = SQLITE_OK;
		} else if (rc == SQLITE_ROW) {
			rc = SQLITE_MISUSE; // a statement that returns rows is not for this call
		}
	}
	if (rc != SQLITE_OK) {
		*extended = sqlite3_extended_errcode(db);
		const char *m = sqlite3_errmsg(db);
		int k = 0;
		for (; m != 0 && m[k] != 0 && k < msgLen - 1; k++) {
			msg[k] = m[k];
		}
		msg[k] = 0;
	}
	sqlite3_reset(stmt);
	sqlite3_clear_bindings(stmt);
	return rc;
}
