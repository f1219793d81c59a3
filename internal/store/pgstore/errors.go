package pgstore

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/spoolq/spool/internal/job"
)

// mapErr maps database errors to the sentinels of package job, keeping the
// original in the chain: a full disk is job.ErrStorageFull; a database that
// cannot be reached, is shutting down, is read-only or refuses connections
// is job.ErrUnavailable. Everything else passes through as an internal
// error.
func mapErr(err error) error {
	if err == nil || errors.Is(err, job.ErrUnavailable) || errors.Is(err, job.ErrStorageFull) {
		return err
	}
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return err
	}
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		switch {
		case pgErr.Code == "53100": // disk_full
			return fmt.Errorf("%w: %w", job.ErrStorageFull, err)
		case strings.HasPrefix(pgErr.Code, "08"), // connection exception
			pgErr.Code == "57P01", pgErr.Code == "57P02", pgErr.Code == "57P03", // shutting down, cannot connect now
			pgErr.Code == "53300", // too many connections
			pgErr.Code == "25006", // read-only transaction (a standby)
			pgErr.Code == "58030": // I/O error
			return fmt.Errorf("%w: %w", job.ErrUnavailable, err)
		}
		return err
	}
	var connErr *pgconn.ConnectError
	var netErr net.Error
	if errors.As(err, &connErr) || errors.As(err, &netErr) || errors.Is(err, io.EOF) ||
		errors.Is(err, io.ErrUnexpectedEOF) || pgconn.SafeToRetry(err) || pgconn.Timeout(err) ||
		strings.Contains(err.Error(), "conn closed") || strings.Contains(err.Error(), "closed pool") {
		return fmt.Errorf("%w: %w", job.ErrUnavailable, err)
	}
	return err
}

// wrap maps err and prefixes what failed.
func wrap(what string, err error) error {
	if err == nil {
		return nil
	}
	return fmt.Errorf("%s: %w", what, mapErr(err))
}

// urlSets reports whether a connection string sets parameter key.
func urlSets(url, key string) bool {
	return strings.Contains(url, key+"=")
}
