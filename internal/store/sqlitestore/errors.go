package sqlitestore

import (
	"errors"
	"fmt"
	"log/slog"
	"sync"

	"github.com/mattn/go-sqlite3"

	"github.com/spoolq/spool/internal/job"
	"github.com/spoolq/spool/internal/store"
)

// mapErr is the one place where SQLite errors become the sentinels of
// package job: a full disk is job.ErrStorageFull; a database that cannot be
// written (read-only, I/O failure, locked by another process, damaged) is
// job.ErrUnavailable. Other errors, and errors already carrying a sentinel,
// are returned as they are.
func mapErr(err error) error {
	if err == nil {
		return nil
	}
	if errors.Is(err, job.ErrStorageFull) || errors.Is(err, job.ErrUnavailable) {
		return err
	}
	var se sqlite3.Error
	if !errors.As(err, &se) {
		return err
	}
	switch se.Code {
	case sqlite3.ErrFull:
		return fmt.Errorf("%w: %w", job.ErrStorageFull, err)
	case sqlite3.ErrReadonly, sqlite3.ErrIoErr, sqlite3.ErrCantOpen, sqlite3.ErrBusy, sqlite3.ErrLocked,
		sqlite3.ErrCorrupt, sqlite3.ErrNotADB, sqlite3.ErrPerm, sqlite3.ErrProtocol, sqlite3.ErrNoLFS:
		return fmt.Errorf("%w: %w", job.ErrUnavailable, err)
	}
	return err
}

// refusal reports whether err is an operation declining the call for the
// caller's reason, which by contract happens before any write.
func refusal(err error) bool {
	var in *job.InputError
	return errors.Is(err, job.ErrNotFound) || errors.Is(err, job.ErrLeaseLost) ||
		errors.Is(err, job.ErrInvalidState) || errors.Is(err, store.ErrScheduleMoved) || errors.As(err, &in)
}

// busy reports whether err is SQLite's "database is locked": a lock held
// by another process that did not let go within busyTimeoutMillis.
func busy(err error) bool {
	var se sqlite3.Error
	return errors.As(err, &se) && se.Code == sqlite3.ErrBusy
}

// fatal reports whether err leaves the database in a state this process can
// no longer trust (an I/O failure during a write or sync, a damaged file):
// the store then refuses writes until restarted.
func fatal(err error) bool {
	var se sqlite3.Error
	if !errors.As(err, &se) {
		return false
	}
	switch se.Code {
	case sqlite3.ErrIoErr, sqlite3.ErrCorrupt, sqlite3.ErrNotADB:
		return true
	}
	return false
}

// wrap gives err the context of the call that failed, mapped to the
// sentinels; nil stays nil.
func wrap(what string, err error) error {
	if err == nil {
		return nil
	}
	return fmt.Errorf("%s: %w", what, mapErr(err))
}

// failState is the store's failed state, entered when the database can no
// longer be trusted (what reached the disk is unknown): every later write
// is refused until a restart.
type failState struct {
	mu     sync.Mutex
	err    error
	logger *slog.Logger
}

// fail puts the store in its failed state: every later write gets err.
func (f *failState) fail(err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.err == nil {
		f.err = fmt.Errorf("store failed, restart needed: %w", err)
		f.logger.Error("sqlitestore: refusing writes after a storage failure", "err", err)
	}
}

// failure returns the error of the failed state, or nil.
func (f *failState) failure() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.err
}
