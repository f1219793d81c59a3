package torture

import (
	"context"
	"database/sql"
	"fmt"
	"net/url"
	"path/filepath"
	"strings"

	_ "github.com/mattn/go-sqlite3" // the driver of the integrity check
)

// IntegrityCheck runs SQLite's PRAGMA integrity_check on the database of
// the data folder dir while no server has it open. The connection is
// read-only, so it leaves the write-ahead log for the next server to
// recover. It returns nil when SQLite answers "ok".
func IntegrityCheck(ctx context.Context, dir string) error {
	path := filepath.Join(dir, "spool.db")
	dsn := "file:" + (&url.URL{Path: path}).EscapedPath() + "?mode=ro&_busy_timeout=5000"
	db, err := sql.Open("sqlite3", dsn)
	if err != nil {
		return fmt.Errorf("integrity check: open %s: %w", path, err)
	}
	defer db.Close()
	rows, err := db.QueryContext(ctx, `PRAGMA integrity_check`)
	if err != nil {
		return fmt.Errorf("integrity check of %s: %w", path, err)
	}
	defer rows.Close()
	var lines []string
	for rows.Next() {
		var line string
		if err := rows.Scan(&line); err != nil {
			return fmt.Errorf("integrity check of %s: %w", path, err)
		}
		lines = append(lines, line)
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("integrity check of %s: %w", path, err)
	}
	if len(lines) != 1 || lines[0] != "ok" {
		return fmt.Errorf("integrity check of %s: %s", path, strings.Join(lines, "; "))
	}
	return nil
}
