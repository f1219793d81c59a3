package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/spoolq/spool/internal/store/pgstore"
	"github.com/spoolq/spool/internal/store/sqlitestore"
	"github.com/spoolq/spool/internal/storecopy"
)

// runMigrateStore is `spool migrate-store --from sqlite:DIR --to
// postgres://…`: it copies every job and queue of an embedded store into a
// PostgreSQL database and checks the copy (see package storecopy). Stop
// the embedded server first: its store belongs to one process. Leases
// survive the move, so workers that held jobs ack them on the new nodes
// with the tokens they have.
func runMigrateStore(args []string) int {
	fs := flag.NewFlagSet("spool migrate-store", flag.ContinueOnError)
	from := fs.String("from", "", "the embedded store: sqlite:DIR (the stopped server's --data folder)")
	to := fs.String("to", os.Getenv("SPOOL_DB"), "PostgreSQL URL, postgres://user:pass@host/db (env SPOOL_DB)")
	fs.Usage = func() {
		fmt.Fprintln(fs.Output(), "usage: spool migrate-store --from sqlite:DIR --to postgres://…")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	dir, ok := strings.CutPrefix(*from, "sqlite:")
	if !ok || dir == "" || *to == "" || fs.NArg() > 0 {
		fs.Usage()
		return 2
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := migrateStore(ctx, dir, *to, os.Stdout); err != nil {
		fmt.Fprintf(os.Stderr, "spool migrate-store: %v\n", err)
		return 1
	}
	return 0
}

// migrateStore copies the embedded store in dir into the database at url.
func migrateStore(ctx context.Context, dir, url string, out io.Writer) error {
	if _, err := os.Stat(dir); err != nil {
		return fmt.Errorf("embedded store: %w", err)
	}
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	src, err := sqlitestore.Open(ctx, sqlitestore.Config{Dir: dir, Logger: quiet})
	if err != nil {
		return fmt.Errorf("open embedded store: %w", err)
	}
	defer src.Close()
	dst, err := pgstore.Open(ctx, pgstore.Config{URL: url, Migrate: true, Logger: quiet})
	if err != nil {
		return fmt.Errorf("open PostgreSQL store: %w", err)
	}
	defer dst.Close()
	started := time.Now()
	res, err := storecopy.Copy(ctx, src, dst)
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "copied %d jobs (%d were already there) and %d queues in %v; every queue's counts match\n",
		res.Copied, res.Jobs-res.Copied, res.Queues, time.Since(started).Round(time.Millisecond))
	return nil
}
