package pgstore

import "github.com/spoolq/spool/internal/store/sqlkit"

// sessions keeps the dashboard's login sessions (session.Store) in
// spool_sessions.
type sessions = sqlkit.Sessions

func newSessions(d *db) *sessions { return sqlkit.NewSessions(&dialect, kitDB{d}) }
