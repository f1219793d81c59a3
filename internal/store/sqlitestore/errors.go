package sqlitestore

import (
	"errors"
	"fmt"

	"github.com/mattn/go-sqlite3"

	"github.com/spoolq/spool/internal/job"
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
// sentinels.
func wrap(what string, err error) error {
	return fmt.Errorf("%s: %w", what, mapErr(err))
}
