package tiered

import (
	"context"
	"time"

	"github.com/spoolq/spool/internal/session"
)

// Sessions live in the durable store, so that a restart keeps them.

// SessionCreate stores a session in the durable store; see
// session.Store.
func (s *Store) SessionCreate(ctx context.Context, p *session.CreateParams) error {
	return s.disk.SessionCreate(ctx, p)
}

// SessionGet reads a session; see session.Store.
func (s *Store) SessionGet(ctx context.Context, idHash string, now time.Time) (*session.Session, error) {
	return s.disk.SessionGet(ctx, idHash, now)
}

// SessionExtend moves a session's expiry; see session.Store.
func (s *Store) SessionExtend(ctx context.Context, idHash string, expiresAt, now time.Time) error {
	return s.disk.SessionExtend(ctx, idHash, expiresAt, now)
}

// SessionDelete ends a session; see session.Store.
func (s *Store) SessionDelete(ctx context.Context, idHash string) error {
	return s.disk.SessionDelete(ctx, idHash)
}
