package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/spoolq/spool/internal/store/pgstore"
)

// migrateCommand is `spool migrate`: it applies the pending schema
// migrations of a PostgreSQL database and exits, for operators who migrate
// before they roll out new nodes. (`spool server --db` also migrates at
// start; nodes that start at once take turns through an advisory lock.)
func (c *cli) migrateCommand() *cobra.Command {
	var db string
	cmd := &cobra.Command{
		Use:   "migrate --db postgres://…",
		Short: "Apply the PostgreSQL schema migrations and exit",
		Long: `Apply the pending schema migrations of a PostgreSQL database and exit, for
operators who migrate before they roll out new nodes. 'spool server --db'
also migrates at start; nodes that start at once take turns.`,
		Example: `  spool migrate --db "postgres://spool:secret@db.internal/spool"
  SPOOL_DB=postgres://spool:secret@db.internal/spool spool migrate`,
		Args: noArgs,
	}
	cmd.Flags().StringVar(&db, "db", c.getenv("SPOOL_DB"), "PostgreSQL URL, postgres://user:pass@host/db (env SPOOL_DB)")
	cmd.Flags().Lookup("db").DefValue = "" // a URL with a password is no default to show
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		if db == "" {
			return usagef("--db is required (or set SPOOL_DB)")
		}
		ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
		defer stop()
		from, to, err := pgstore.Migrate(ctx, db)
		if err != nil {
			return err
		}
		if from == to {
			fmt.Fprintf(c.out, "schema is current (version %d)\n", to)
		} else {
			fmt.Fprintf(c.out, "migrated schema from version %d to %d\n", from, to)
		}
		return nil
	}
	return cmd
}
