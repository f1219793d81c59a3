package tiered

import (
	"context"
	"time"

	"github.com/spoolq/spool/internal/store"
)

// Sessions live in the durable store, so that a restart keeps them.

// SessionCreate stores a session in the durable store; see
// store.Sessions.
func (s *Store) SessionCreate(ctx context.Context, p *store.SessionCreateParams) error {
	return s.disk.SessionCreate(ctx, p)
}

// SessionGet reads a session; see store.Sessions.
func (s *Store) SessionGet(ctx context.Context, idHash string, now time.Time) (*store.Session, error) {
	return s.disk.SessionGet(ctx, idHash, now)
}

// SessionExtend moves a session's expiry; see store.Sessions.
func (s *Store) SessionExtend(ctx context.Context, idHash string, expiresAt, now time.Time) error {
	return s.disk.SessionExtend(ctx, idHash, expiresAt, now)
}

// SessionDelete ends a session; see store.Sessions.
func (s *Store) SessionDelete(ctx context.Context, idHash string) error {
	return s.disk.SessionDelete(ctx, idHash)
}
