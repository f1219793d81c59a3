package pgstore

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/spoolq/spool/internal/job"
	"github.com/spoolq/spool/internal/session"
)

// sessions keeps the dashboard's login sessions.
type sessions struct {
	*db
}

const (
	// sqlSessionLock serialises the logins of one token across nodes, so
	// that two at once cannot both keep the cap's last place.
	sqlSessionLock   = `SELECT pg_advisory_xact_lock($1, hashtext(current_schema() || ':session:' || $2))`
	sqlSessionInsert = `INSERT INTO spool_sessions (id_hash, token_name, fingerprint, created_at, expires_at) VALUES ($1, $2, $3, $4, $5)`
	sqlSessionGet    = `SELECT token_name, fingerprint, created_at, expires_at FROM spool_sessions WHERE id_hash = $1 AND expires_at > $2`
	sqlSessionExtend = `UPDATE spool_sessions SET expires_at = $2 WHERE id_hash = $1 AND expires_at > $3`
	sqlSessionDelete = `DELETE FROM spool_sessions WHERE id_hash = $1`
	// sqlSessionEndExpired deletes the expired sessions of one token.
	sqlSessionEndExpired = `DELETE FROM spool_sessions WHERE token_name = $1 AND expires_at <= $2`
	// sqlSessionPrune deletes a bounded batch of expired sessions.
	sqlSessionPrune = `DELETE FROM spool_sessions WHERE id_hash IN
(SELECT id_hash FROM spool_sessions WHERE expires_at <= $1 LIMIT $2)`
	// sqlSessionTrim keeps the newest sessions of one token.
	sqlSessionTrim = `DELETE FROM spool_sessions WHERE id_hash IN
(SELECT id_hash FROM spool_sessions WHERE token_name = $1 ORDER BY created_at DESC, id_hash DESC OFFSET $2)`
)

// SessionCreate stores a session, ends the oldest of its token beyond
// the cap and prunes expired ones; see session.Store.
func (ss *sessions) SessionCreate(ctx context.Context, p *session.CreateParams) error {
	if err := p.Validate(); err != nil {
		return fmt.Errorf("create session: %w", err)
	}
	se := &p.Session
	now := micro(p.Now)
	err := ss.tx(ctx, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, sqlSessionLock, lockClass, se.TokenName); err != nil {
			return fmt.Errorf("lock the sessions of the token: %w", err)
		}
		if _, err := tx.Exec(ctx, sqlSessionInsert, se.IDHash, se.TokenName, se.TokenFingerprint, micro(se.CreatedAt), micro(se.ExpiresAt)); err != nil {
			return fmt.Errorf("insert session: %w", err)
		}
		if _, err := tx.Exec(ctx, sqlSessionEndExpired, se.TokenName, now); err != nil {
			return fmt.Errorf("end expired sessions of the token: %w", err)
		}
		if _, err := tx.Exec(ctx, sqlSessionPrune, now, session.PruneBatch); err != nil {
			return fmt.Errorf("prune expired sessions: %w", err)
		}
		if _, err := tx.Exec(ctx, sqlSessionTrim, se.TokenName, p.MaxPerToken); err != nil {
			return fmt.Errorf("end the oldest sessions of the token: %w", err)
		}
		return nil
	})
	if err != nil {
		return wrap("create session", err)
	}
	return nil
}

// SessionGet reads a live session; see session.Store.
func (ss *sessions) SessionGet(ctx context.Context, idHash string, now time.Time) (*session.Session, error) {
	if err := ss.check(); err != nil {
		return nil, wrap("get session", err)
	}
	se := session.Session{IDHash: idHash}
	err := ss.pool.QueryRow(ctx, sqlSessionGet, idHash, micro(now)).Scan(&se.TokenName, &se.TokenFingerprint, &se.CreatedAt, &se.ExpiresAt)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, fmt.Errorf("get session: %w", job.ErrNotFound)
	}
	if err != nil {
		return nil, wrap("get session", err)
	}
	se.CreatedAt, se.ExpiresAt = se.CreatedAt.UTC(), se.ExpiresAt.UTC()
	return &se, nil
}

// SessionExtend moves a live session's expiry; see session.Store.
func (ss *sessions) SessionExtend(ctx context.Context, idHash string, expiresAt, now time.Time) error {
	var n int64
	err := ss.retry(ctx, func() error {
		tag, err := ss.pool.Exec(ctx, sqlSessionExtend, idHash, micro(expiresAt), micro(now))
		n = tag.RowsAffected()
		return err
	})
	if err != nil {
		return wrap("extend session", err)
	}
	if n == 0 {
		return fmt.Errorf("extend session: %w", job.ErrNotFound)
	}
	return nil
}

// SessionDelete ends a session; see session.Store.
func (ss *sessions) SessionDelete(ctx context.Context, idHash string) error {
	err := ss.retry(ctx, func() error {
		_, err := ss.pool.Exec(ctx, sqlSessionDelete, idHash)
		return err
	})
	if err != nil {
		return wrap("delete session", err)
	}
	return nil
}
