// The write-ahead log buffer: a VFS that passes every call to SQLite's
// "unix-excl" VFS (see walbuffer.go), except that it gathers the writes of
// a transaction's frames into the write-ahead log and writes them with one
// call when the commit frame is complete, and grows the log ahead of its
// frames (see grow). The declarations below are those
// of sqlite3.h (public domain) that it needs; the SQLite it links with is
// the one github.com/mattn/go-sqlite3 builds into the binary.

#include <stdlib.h>
#include <string.h>

typedef long long int sqlite3_int64;
typedef struct sqlite3_file sqlite3_file;
typedef struct sqlite3_io_methods sqlite3_io_methods;
typedef struct sqlite3_vfs sqlite3_vfs;
typedef void (*sqlite3_syscall_ptr)(void);

struct sqlite3_file {
	const struct sqlite3_io_methods *pMethods;
};

struct sqlite3_io_methods {
	int iVersion;
	int (*xClose)(sqlite3_file *);
	int (*xRead)(sqlite3_file *, void *, int iAmt, sqlite3_int64 iOfst);
	int (*xWrite)(sqlite3_file *, const void *, int iAmt, sqlite3_int64 iOfst);
	int (*xTruncate)(sqlite3_file *, sqlite3_int64 size);
	int (*xSync)(sqlite3_file *, int flags);
	int (*xFileSize)(sqlite3_file *, sqlite3_int64 *pSize);
	int (*xLock)(sqlite3_file *, int);
	int (*xUnlock)(sqlite3_file *, int);
	int (*xCheckReservedLock)(sqlite3_file *, int *pResOut);
	int (*xFileControl)(sqlite3_file *, int op, void *pArg);
	int (*xSectorSize)(sqlite3_file *);
	int (*xDeviceCharacteristics)(sqlite3_file *);
	int (*xShmMap)(sqlite3_file *, int iPg, int pgsz, int, void volatile **);
	int (*xShmLock)(sqlite3_file *, int offset, int n, int flags);
	void (*xShmBarrier)(sqlite3_file *);
	int (*xShmUnmap)(sqlite3_file *, int deleteFlag);
	int (*xFetch)(sqlite3_file *, sqlite3_int64 iOfst, int iAmt, void **pp);
	int (*xUnfetch)(sqlite3_file *, sqlite3_int64 iOfst, void *p);
};

struct sqlite3_vfs {
	int iVersion;
	int szOsFile;
	int mxPathname;
	sqlite3_vfs *pNext;
	const char *zName;
	void *pAppData;
	int (*xOpen)(sqlite3_vfs *, const char *zName, sqlite3_file *, int flags, int *pOutFlags);
	int (*xDelete)(sqlite3_vfs *, const char *zName, int syncDir);
	int (*xAccess)(sqlite3_vfs *, const char *zName, int flags, int *pResOut);
	int (*xFullPathname)(sqlite3_vfs *, const char *zName, int nOut, char *zOut);
	void *(*xDlOpen)(sqlite3_vfs *, const char *zFilename);
	void (*xDlError)(sqlite3_vfs *, int nByte, char *zErrMsg);
	void (*(*xDlSym)(sqlite3_vfs *, void *, const char *zSymbol))(void);
	void (*xDlClose)(sqlite3_vfs *, void *);
	int (*xRandomness)(sqlite3_vfs *, int nByte, char *zOut);
	int (*xSleep)(sqlite3_vfs *, int microseconds);
	int (*xCurrentTime)(sqlite3_vfs *, double *);
	int (*xGetLastError)(sqlite3_vfs *, int, char *);
	int (*xCurrentTimeInt64)(sqlite3_vfs *, sqlite3_int64 *);
	int (*xSetSystemCall)(sqlite3_vfs *, const char *zName, sqlite3_syscall_ptr);
	sqlite3_syscall_ptr (*xGetSystemCall)(sqlite3_vfs *, const char *zName);
	const char *(*xNextSystemCall)(sqlite3_vfs *, const char *zName);
};

extern sqlite3_vfs *sqlite3_vfs_find(const char *zVfsName);
extern int sqlite3_vfs_register(sqlite3_vfs *, int makeDflt);

#define SQLITE_OK 0
#define SQLITE_ERROR 1
#define SQLITE_NOMEM 7
#define SQLITE_OPEN_WAL 0x00080000

// walFrameHeader is the size of a frame's header in the write-ahead log,
// walHeader that of the log's own header.
#define walFrameHeader 24
#define walHeader 32

// walBufferSize bounds the bytes gathered; a write that would pass it
// writes what is gathered first.
#define walBufferSize (1 << 20)

// spoolFile is a file opened through the buffering VFS: the base VFS's
// file follows it in memory (real). Only a write-ahead log buffers.
typedef struct spoolFile {
	sqlite3_file base;
	sqlite3_file *real;
	char *buf;             // the bytes gathered, for offset start on
	int len;               // how many
	sqlite3_int64 start;   // their offset in the file
	int commitFrame;       // the last write was a commit frame's header
	sqlite3_int64 lastRead; // the offset of the last read, if no write followed; -1 otherwise
	sqlite3_int64 grown;    // the log's length when this file last grew or sized it
} spoolFile;

static sqlite3_vfs *baseVFS;
static sqlite3_vfs bufferingVFS;

// walGrowStep is how far the log grows at a time (see grow); walGrowLimit
// is the length past which it grows no further ahead of its frames. Both
// are set at registration.
static sqlite3_int64 walGrowStep, walGrowLimit;

// walWriteChunk bounds one write to the base VFS: the unix VFS writes
// at most 128 KiB - 1 bytes a call (its seekAndWriteFd masks the length),
// as SQLite's own writes never pass a page.
#define walWriteChunk (96 << 10)

// walZeros is what grow writes.
static const char walZeros[walWriteChunk];

// grow lengthens the log with zeros, up to the next multiple of
// walGrowStep past end (walGrowLimit at most), when a write to end would
// lengthen it. An fsync of a file whose length and blocks changed also
// writes the file's metadata: on the disk measured (BENCHMARKS.md,
// BenchmarkFsyncOfTheLog) such fsyncs took 40 % longer than those of a
// log grown ahead, zeros included. Grown ahead, the log changes length
// once a step rather than at every commit while it grows. SQLite ignores
// what follows the last valid frame, so the zeros read as the end of the
// log. It only ever writes past the file's length, which it reads first:
// the write connection alone writes the log, holding its write lock, so
// nothing else writes meanwhile. It is best effort: a failed write (a
// full disk) leaves the log as long as it got, and the frames are written
// as they would be otherwise.
static void grow(spoolFile *p, sqlite3_int64 end) {
	if (end <= p->grown || end >= walGrowLimit) {
		return;
	}
	sqlite3_int64 size;
	if (p->real->pMethods->xFileSize(p->real, &size) != SQLITE_OK) {
		return;
	}
	p->grown = size;
	if (end <= size) {
		return;
	}
	sqlite3_int64 to = (end / walGrowStep + 1) * walGrowStep;
	if (to > walGrowLimit) {
		to = walGrowLimit;
	}
	while (p->grown < to) {
		int k = to - p->grown < walWriteChunk ? (int)(to - p->grown) : walWriteChunk;
		if (p->real->pMethods->xWrite(p->real, walZeros, k, p->grown) != SQLITE_OK) {
			return;
		}
		p->grown += k;
	}
}

// flush writes the bytes gathered, if any, in chunks the base VFS
// takes whole.
static int flush(spoolFile *p) {
	int n = p->len;
	p->len = 0;
	if (n > 0) {
		grow(p, p->start + n);
	}
	for (int done = 0; done < n;) {
		int k = n - done < walWriteChunk ? n - done : walWriteChunk;
		int rc = p->real->pMethods->xWrite(p->real, p->buf + done, k, p->start + done);
		if (rc != SQLITE_OK) {
			return rc;
		}
		done += k;
	}
	return SQLITE_OK;
}

// Calls on any file go to the base VFS's file.

static int passClose(sqlite3_file *f) {
	spoolFile *p = (spoolFile *)f;
	int rc = p->real->pMethods->xClose(p->real);
	free(p->buf);
	p->buf = 0;
	return rc;
}
static int passRead(sqlite3_file *f, void *z, int n, sqlite3_int64 off) {
	spoolFile *p = (spoolFile *)f;
	return p->real->pMethods->xRead(p->real, z, n, off);
}
static int passWrite(sqlite3_file *f, const void *z, int n, sqlite3_int64 off) {
	spoolFile *p = (spoolFile *)f;
	return p->real->pMethods->xWrite(p->real, z, n, off);
}
static int passTruncate(sqlite3_file *f, sqlite3_int64 size) {
	spoolFile *p = (spoolFile *)f;
	return p->real->pMethods->xTruncate(p->real, size);
}
static int passSync(sqlite3_file *f, int flags) {
	spoolFile *p = (spoolFile *)f;
	return p->real->pMethods->xSync(p->real, flags);
}
static int passFileSize(sqlite3_file *f, sqlite3_int64 *size) {
	spoolFile *p = (spoolFile *)f;
	return p->real->pMethods->xFileSize(p->real, size);
}
static int passLock(sqlite3_file *f, int lock) {
	spoolFile *p = (spoolFile *)f;
	return p->real->pMethods->xLock(p->real, lock);
}
static int passUnlock(sqlite3_file *f, int lock) {
	spoolFile *p = (spoolFile *)f;
	return p->real->pMethods->xUnlock(p->real, lock);
}
static int passCheckReservedLock(sqlite3_file *f, int *out) {
	spoolFile *p = (spoolFile *)f;
	return p->real->pMethods->xCheckReservedLock(p->real, out);
}
static int passFileControl(sqlite3_file *f, int op, void *arg) {
	spoolFile *p = (spoolFile *)f;
	return p->real->pMethods->xFileControl(p->real, op, arg);
}
static int passSectorSize(sqlite3_file *f) {
	spoolFile *p = (spoolFile *)f;
	return p->real->pMethods->xSectorSize(p->real);
}
static int passDeviceCharacteristics(sqlite3_file *f) {
	spoolFile *p = (spoolFile *)f;
	return p->real->pMethods->xDeviceCharacteristics(p->real);
}
static int passShmMap(sqlite3_file *f, int pg, int pgsz, int extend, void volatile **pp) {
	spoolFile *p = (spoolFile *)f;
	return p->real->pMethods->xShmMap(p->real, pg, pgsz, extend, pp);
}
static int passShmLock(sqlite3_file *f, int offset, int n, int flags) {
	spoolFile *p = (spoolFile *)f;
	return p->real->pMethods->xShmLock(p->real, offset, n, flags);
}
static void passShmBarrier(sqlite3_file *f) {
	spoolFile *p = (spoolFile *)f;
	p->real->pMethods->xShmBarrier(p->real);
}
static int passShmUnmap(sqlite3_file *f, int deleteFlag) {
	spoolFile *p = (spoolFile *)f;
	return p->real->pMethods->xShmUnmap(p->real, deleteFlag);
}
static int passFetch(sqlite3_file *f, sqlite3_int64 off, int n, void **pp) {
	spoolFile *p = (spoolFile *)f;
	return p->real->pMethods->xFetch(p->real, off, n, pp);
}
static int passUnfetch(sqlite3_file *f, sqlite3_int64 off, void *pv) {
	spoolFile *p = (spoolFile *)f;
	return p->real->pMethods->xUnfetch(p->real, off, pv);
}

// A write-ahead log's calls write what is gathered before anything that
// reads, sizes, syncs, truncates or closes the file.

static int walClose(sqlite3_file *f) {
	int rc = flush((spoolFile *)f);
	int rc2 = passClose(f);
	return rc != SQLITE_OK ? rc : rc2;
}
static int walRead(sqlite3_file *f, void *z, int n, sqlite3_int64 off) {
	spoolFile *p = (spoolFile *)f;
	int rc = flush(p);
	p->lastRead = off;
	return rc != SQLITE_OK ? rc : passRead(f, z, n, off);
}
static int walTruncate(sqlite3_file *f, sqlite3_int64 size) {
	spoolFile *p = (spoolFile *)f;
	int rc = flush(p);
	if (size < p->grown) {
		p->grown = size;
	}
	return rc != SQLITE_OK ? rc : passTruncate(f, size);
}
static int walSync(sqlite3_file *f, int flags) {
	int rc = flush((spoolFile *)f);
	return rc != SQLITE_OK ? rc : passSync(f, flags);
}
static int walFileSize(sqlite3_file *f, sqlite3_int64 *size) {
	int rc = flush((spoolFile *)f);
	return rc != SQLITE_OK ? rc : passFileSize(f, size);
}
static int walFileControl(sqlite3_file *f, int op, void *arg) {
	int rc = flush((spoolFile *)f);
	return rc != SQLITE_OK ? rc : passFileControl(f, op, arg);
}

// isCommitHeader reports whether z, n bytes written at off, is the header
// of a commit frame: a frame header whose "database size after commit"
// field is set.
static int isCommitHeader(const unsigned char *z, int n, sqlite3_int64 off) {
	if (n != walFrameHeader || off < walHeader) {
		return 0;
	}
	return (z[4] | z[5] | z[6] | z[7]) != 0;
}

// walWrite gathers a write that continues the bytes gathered, and writes
// them all once the page of a commit frame is among them, before SQLite
// publishes the commit: other connections read the frames from the file,
// and the syncer fsyncs it through descriptors of its own. A write
// elsewhere in the file writes what is gathered first, and so does one
// too large to gather. A commit frame's header written again has no page
// to wait for, and is written at once: SQLite writes the headers of a
// transaction that spilled pages to the log again once its commit frame
// is written, that of the commit frame last, each right after reading
// its frame, where a new frame's header follows a write.
static int walWrite(sqlite3_file *f, const void *z, int n, sqlite3_int64 off) {
	spoolFile *p = (spoolFile *)f;
	int rc;
	int rewrite = off == p->lastRead;
	p->lastRead = -1;
	if (p->len > 0 && (off != p->start + p->len || p->len + n > walBufferSize)) {
		if ((rc = flush(p)) != SQLITE_OK) {
			return rc;
		}
	}
	if (n > walWriteChunk) {
		p->commitFrame = 0;
		grow(p, off + n);
		return passWrite(f, z, n, off);
	}
	if (p->buf == 0 && (p->buf = malloc(walBufferSize)) == 0) {
		return SQLITE_NOMEM;
	}
	if (p->len == 0) {
		p->start = off;
	}
	memcpy(p->buf + p->len, z, n);
	p->len += n;
	if (p->commitFrame) {
		p->commitFrame = 0;
		return flush(p);
	}
	if (isCommitHeader((const unsigned char *)z, n, off)) {
		p->commitFrame = 1; // a page that follows goes with it
		if (rewrite) {
			return flush(p);
		}
	}
	return SQLITE_OK;
}

static const sqlite3_io_methods passMethods = {
	3, passClose, passRead, passWrite, passTruncate, passSync, passFileSize,
	passLock, passUnlock, passCheckReservedLock, passFileControl, passSectorSize,
	passDeviceCharacteristics, passShmMap, passShmLock, passShmBarrier, passShmUnmap,
	passFetch, passUnfetch,
};

static const sqlite3_io_methods walMethods = {
	3, walClose, walRead, walWrite, walTruncate, walSync, walFileSize,
	passLock, passUnlock, passCheckReservedLock, walFileControl, passSectorSize,
	passDeviceCharacteristics, passShmMap, passShmLock, passShmBarrier, passShmUnmap,
	passFetch, passUnfetch,
};

// bufferingOpen opens the file with the base VFS and gives it the
// methods of its kind.
static int bufferingOpen(sqlite3_vfs *vfs, const char *name, sqlite3_file *f, int flags, int *outFlags) {
	spoolFile *p = (spoolFile *)f;
	memset(p, 0, sizeof(*p));
	p->real = (sqlite3_file *)&p[1];
	p->lastRead = -1;
	int rc = baseVFS->xOpen(baseVFS, name, p->real, flags, outFlags);
	if (rc != SQLITE_OK) {
		if (p->real->pMethods != 0) {
			p->real->pMethods->xClose(p->real);
		}
		p->base.pMethods = 0;
		return rc;
	}
	p->base.pMethods = (flags & SQLITE_OPEN_WAL) ? &walMethods : &passMethods;
	return SQLITE_OK;
}

// spool_register_wal_buffer registers the buffering VFS under name, over
// the VFS named base, growing logs ahead by growStep bytes up to
// growLimit, once that VFS is version 3 (as every SQLite since
// 3.7.6 has it); it returns SQLITE_OK or an error code.
int spool_register_wal_buffer(const char *name, const char *base, sqlite3_int64 growStep, sqlite3_int64 growLimit) {
	walGrowStep = growStep;
	walGrowLimit = growLimit;
	baseVFS = sqlite3_vfs_find(base);
	if (baseVFS == 0 || baseVFS->iVersion < 3) {
		return SQLITE_ERROR;
	}
	bufferingVFS = *baseVFS;
	bufferingVFS.pNext = 0;
	bufferingVFS.zName = name;
	bufferingVFS.szOsFile = (int)sizeof(spoolFile) + baseVFS->szOsFile;
	bufferingVFS.xOpen = bufferingOpen;
	return sqlite3_vfs_register(&bufferingVFS, 0);
}
