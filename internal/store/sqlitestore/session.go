package sqlitestore

import "github.com/spoolq/spool/internal/store/sqlkit"

// sessions keeps the dashboard's login sessions (session.Store) in the
// sessions table.
type sessions = sqlkit.Sessions

func newSessions(s *Store) *sessions { return sqlkit.NewSessions(&dialect, kitDB{s}) }
