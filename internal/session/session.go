// Package session holds the dashboard's login sessions as a store keeps
// them, and the rule every store applies before it writes one.
package session

import (
	"context"
	"time"

	"github.com/spoolq/spool/internal/job"
)

// Store keeps the dashboard's login sessions in the store, so that
// every node that shares the store knows a session made on any of them
// and a logout on one ends it on all. The store keeps what it is given:
// the SHA-256 of a session's id (never the id, which only the browser's
// cookie holds), the name and fingerprint of the token it logged in with,
// and its times. It decides nothing: the caller computes every expiry; a
// session is live while its ExpiresAt is after the Now of a call.
type Store interface {
	// SessionCreate stores p.Session, a live session (ExpiresAt after
	// p.Now) whose IDHash no session has. In the same atomic step it ends
	// the oldest sessions of the same TokenName (by CreatedAt, then
	// IDHash) so that at most p.MaxPerToken remain, the new one among
	// them, and deletes expired sessions (ExpiresAt at or before p.Now):
	// every one of the same TokenName, and up to PruneBatch of
	// others. Logins therefore never grow the store without bound.
	SessionCreate(ctx context.Context, p *CreateParams) error
	// SessionGet returns the session whose IDHash is idHash if it is live
	// at now, else job.ErrNotFound.
	SessionGet(ctx context.Context, idHash string, now time.Time) (*Session, error)
	// SessionExtend sets the ExpiresAt of the session of idHash to
	// expiresAt if it is live at now, else changes nothing and returns
	// job.ErrNotFound: an ended session never comes back.
	SessionExtend(ctx context.Context, idHash string, expiresAt, now time.Time) error
	// SessionDelete ends the session of idHash. Ending one that does not
	// exist, or no longer does, is not an error.
	SessionDelete(ctx context.Context, idHash string) error
}

// PruneBatch bounds the expired sessions of other tokens that one
// SessionCreate deletes.
const PruneBatch = 100

// Session is one login session as the store keeps it.
type Session struct {
	// IDHash is the SHA-256 of the session's id, in lower-case hex.
	IDHash string
	// TokenName names the auth token the session logged in with.
	TokenName string
	// TokenFingerprint identifies the token's secret without revealing
	// it, so that a session of a token whose secret changed is refused.
	TokenFingerprint string
	// CreatedAt is when the session logged in.
	CreatedAt time.Time
	// ExpiresAt is when the session ends unless extended.
	ExpiresAt time.Time
}

// CreateParams creates a session.
type CreateParams struct {
	Session Session
	// MaxPerToken bounds the sessions of the session's token (at least 1).
	MaxPerToken int
	Now         time.Time
}

// Validate refuses, as a *job.InputError, a session that is not live at
// p.Now or a cap below 1; every store calls it before it writes.
func (p *CreateParams) Validate() error {
	if !p.Session.ExpiresAt.After(p.Now) || p.MaxPerToken < 1 {
		return job.Invalid("session", "must expire after now, with a cap of at least 1")
	}
	return nil
}
