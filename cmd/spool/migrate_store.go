package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/spoolq/spool/internal/store/pgstore"
	"github.com/spoolq/spool/internal/store/sqlitestore"
	"github.com/spoolq/spool/internal/storecopy"
)

// migrateStoreCommand is `spool migrate-store --from sqlite:DIR --to
// postgres://…`: it copies every job and queue of an embedded store into a
// PostgreSQL database and checks the copy (see package storecopy). Stop
// the embedded server first: its store belongs to one process. Leases
// survive the move, so workers that held jobs ack them on the new nodes
// with the tokens they have.
func (c *cli) migrateStoreCommand() *cobra.Command {
	var from, to string
	cmd := &cobra.Command{
		Use:   "migrate-store --from sqlite:DIR --to postgres://…",
		Short: "Copy an embedded store into PostgreSQL and check the copy",
		Long: `Copy every job, queue and schedule of an embedded store into a PostgreSQL
database and check that every queue's counts match. Stop the embedded
server first: its store belongs to one process. Leases survive the move.`,
		Example: `  spool migrate-store --from sqlite:./spool-data --to "postgres://spool:secret@db.internal/spool"`,
		Args:    noArgs,
	}
	cmd.Flags().StringVar(&from, "from", "", "the embedded store: sqlite:DIR (the stopped server's --data folder)")
	cmd.Flags().StringVar(&to, "to", c.getenv("SPOOL_DB"), "PostgreSQL URL, postgres://user:pass@host/db (env SPOOL_DB)")
	cmd.Flags().Lookup("to").DefValue = "" // a URL with a password is no default to show
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		dir, ok := strings.CutPrefix(from, "sqlite:")
		if !ok || dir == "" {
			return usagef("--from must name the embedded store as sqlite:DIR")
		}
		if to == "" {
			return usagef("--to is required (or set SPOOL_DB)")
		}
		ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
		defer stop()
		return migrateStore(ctx, dir, to, c.out)
	}
	return cmd
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
