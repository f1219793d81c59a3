package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/spoolq/spool/internal/store/pgstore"
)

// runMigrate is `spool migrate`: it applies the pending schema migrations
// of a PostgreSQL database and exits, for operators who migrate before
// they roll out new nodes. (`spool server --db` also migrates at start;
// nodes that start at once take turns through an advisory lock.)
func runMigrate(args []string) int {
	fs := flag.NewFlagSet("spool migrate", flag.ContinueOnError)
	db := fs.String("db", os.Getenv("SPOOL_DB"), "PostgreSQL URL, postgres://user:pass@host/db (env SPOOL_DB)")
	fs.Usage = func() {
		fmt.Fprintln(fs.Output(), "usage: spool migrate --db postgres://…")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	if *db == "" || fs.NArg() > 0 {
		fs.Usage()
		return 2
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	from, to, err := pgstore.Migrate(ctx, *db)
	if err != nil {
		fmt.Fprintf(os.Stderr, "spool migrate: %v\n", err)
		return 1
	}
	if from == to {
		fmt.Printf("schema is current (version %d)\n", to)
	} else {
		fmt.Printf("migrated schema from version %d to %d\n", from, to)
	}
	return 0
}
