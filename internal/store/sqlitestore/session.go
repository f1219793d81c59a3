package sqlitestore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/spoolq/spool/internal/job"
	"github.com/spoolq/spool/internal/session"
)

const (
	sqlSessionInsert = `INSERT INTO sessions (id_hash, token_name, fingerprint, created_at, expires_at) VALUES (?, ?, ?, ?, ?)`
	sqlSessionGet    = `SELECT token_name, fingerprint, created_at, expires_at FROM sessions WHERE id_hash = ? AND expires_at > ?`
	sqlSessionExtend = `UPDATE sessions SET expires_at = ? WHERE id_hash = ? AND expires_at > ?`
	sqlSessionDelete = `DELETE FROM sessions WHERE id_hash = ?`
	// sqlSessionEndExpired deletes the expired sessions of one token.
	sqlSessionEndExpired = `DELETE FROM sessions WHERE token_name = ? AND expires_at <= ?`
	// sqlSessionPrune deletes a bounded batch of expired sessions.
	sqlSessionPrune = `DELETE FROM sessions WHERE id_hash IN
(SELECT id_hash FROM sessions INDEXED BY sessions_expiry WHERE expires_at <= ? LIMIT ?)`
	// sqlSessionTrim keeps the newest sessions of one token.
	sqlSessionTrim = `DELETE FROM sessions WHERE id_hash IN
(SELECT id_hash FROM sessions INDEXED BY sessions_token WHERE token_name = ? ORDER BY created_at DESC, id_hash DESC LIMIT -1 OFFSET ?)`
)

// SessionCreate stores a session, ends the oldest of its token beyond
// the cap and prunes expired ones; see session.Store.
func (s *Store) SessionCreate(ctx context.Context, p *session.CreateParams) error {
	if err := p.Validate(); err != nil {
		return fmt.Errorf("create session: %w", err)
	}
	se := &p.Session
	now := p.Now.UTC().UnixNano()
	return wrap("create session", s.do(ctx, 1, func(w *writer) error {
		bg := context.Background()
		if _, err := w.conn.ExecContext(bg, sqlSessionInsert, se.IDHash, se.TokenName, se.TokenFingerprint,
			se.CreatedAt.UTC().UnixNano(), se.ExpiresAt.UTC().UnixNano()); err != nil {
			return fmt.Errorf("insert session: %w", err)
		}
		if _, err := w.conn.ExecContext(bg, sqlSessionEndExpired, se.TokenName, now); err != nil {
			return fmt.Errorf("end expired sessions of the token: %w", err)
		}
		if _, err := w.conn.ExecContext(bg, sqlSessionPrune, now, session.PruneBatch); err != nil {
			return fmt.Errorf("prune expired sessions: %w", err)
		}
		if _, err := w.conn.ExecContext(bg, sqlSessionTrim, se.TokenName, p.MaxPerToken); err != nil {
			return fmt.Errorf("end the oldest sessions of the token: %w", err)
		}
		return nil
	}))
}

// SessionGet reads a live session; see session.Store.
func (s *Store) SessionGet(ctx context.Context, idHash string, now time.Time) (*session.Session, error) {
	if err := s.check(); err != nil {
		return nil, wrap("get session", err)
	}
	se := session.Session{IDHash: idHash}
	var created, expires int64
	err := s.rdb.QueryRowContext(ctx, sqlSessionGet, idHash, now.UTC().UnixNano()).Scan(&se.TokenName, &se.TokenFingerprint, &created, &expires)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("get session: %w", job.ErrNotFound)
	}
	if err != nil {
		return nil, wrap("get session", err)
	}
	se.CreatedAt, se.ExpiresAt = fromNanos(created), fromNanos(expires)
	return &se, nil
}

// SessionExtend moves a live session's expiry; see session.Store.
func (s *Store) SessionExtend(ctx context.Context, idHash string, expiresAt, now time.Time) error {
	return wrap("extend session", s.do(ctx, 1, func(w *writer) error {
		res, err := w.conn.ExecContext(context.Background(), sqlSessionExtend, expiresAt.UTC().UnixNano(), idHash, now.UTC().UnixNano())
		if err != nil {
			return fmt.Errorf("extend session: %w", err)
		}
		if n, err := res.RowsAffected(); err != nil || n == 0 {
			return fmt.Errorf("session: %w", job.ErrNotFound)
		}
		return nil
	}))
}

// SessionDelete ends a session; see session.Store.
func (s *Store) SessionDelete(ctx context.Context, idHash string) error {
	return wrap("delete session", s.do(ctx, 1, func(w *writer) error {
		if _, err := w.conn.ExecContext(context.Background(), sqlSessionDelete, idHash); err != nil {
			return fmt.Errorf("delete session: %w", err)
		}
		return nil
	}))
}
