package main

import (
	"strings"
	"testing"

	"github.com/spoolq/spool/internal/config"
)

// TestStartLineNamesTheStoreWithoutSecrets checks that the start-up line
// says which store a node uses, and never prints PostgreSQL's password.
func TestStartLineNamesTheStoreWithoutSecrets(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		cfg  config.Config
		want string
	}{
		{config.Config{Data: "./spool-data", Sync: "full"}, "data ./spool-data, sync full"},
		{config.Config{DB: "postgres://spool:hunter2@db.internal:5432/jobs?sslmode=disable"}, "PostgreSQL at db.internal:5432/jobs"},
		{config.Config{DB: "host=db.internal password=hunter2"}, "PostgreSQL"},
	} {
		got := storeOf(c.cfg)
		if got != c.want || strings.Contains(got, "hunter2") {
			t.Errorf("storeOf(%q) = %q, want %q", c.cfg.DB, got, c.want)
		}
	}
}
