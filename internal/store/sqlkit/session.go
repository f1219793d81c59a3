package sqlkit

import (
	"context"
	"fmt"
	"time"

	"github.com/spoolq/spool/internal/job"
	"github.com/spoolq/spool/internal/session"
)

// Sessions keeps the dashboard's login sessions in a store's sessions
// table; it implements session.Store.
type Sessions struct {
	d   *Dialect
	db  DB
	sql sessionSQL
}

// sessionSQL are the statements of Sessions, spelt in one dialect.
type sessionSQL struct {
	lock, insert, get, extend, del string
	// endExpired deletes the expired sessions of one token.
	endExpired string
	// prune deletes a bounded batch of expired sessions.
	prune string
	// trim keeps the newest sessions of one token.
	trim string
}

// NewSessions serves session.Store on db, which speaks d.
func NewSessions(d *Dialect, db DB) *Sessions {
	t := d.Prefix + "sessions"
	return &Sessions{d: d, db: db, sql: sessionSQL{
		lock: d.render(d.Lock),
		insert: d.render(`INSERT INTO ` + t + ` (id_hash, token_name, fingerprint, created_at, expires_at)
VALUES ($1, $2, $3, $4, $5)`),
		get:        d.render(`SELECT token_name, fingerprint, created_at, expires_at FROM ` + t + ` WHERE id_hash = $1 AND expires_at > $2`),
		extend:     d.render(`UPDATE ` + t + ` SET expires_at = $2 WHERE id_hash = $1 AND expires_at > $3`),
		del:        d.render(`DELETE FROM ` + t + ` WHERE id_hash = $1`),
		endExpired: d.render(`DELETE FROM ` + t + ` WHERE token_name = $1 AND expires_at <= $2`),
		prune: d.render(`DELETE FROM ` + t + ` WHERE id_hash IN
(SELECT id_hash FROM ` + t + d.indexed("sessions_expiry") + ` WHERE expires_at <= $1 LIMIT $2)`),
		trim: d.render(`DELETE FROM ` + t + ` WHERE token_name = $1 AND id_hash NOT IN
(SELECT id_hash FROM ` + t + d.indexed("sessions_token") + ` WHERE token_name = $1 ORDER BY created_at DESC, id_hash DESC LIMIT $2)`),
	}}
}

// SessionCreate stores a session, ends the oldest of its token beyond
// the cap and prunes expired ones, under the lock of the token's
// sessions, so that two logins at once cannot both keep the cap's last
// place; see session.Store.
func (s *Sessions) SessionCreate(ctx context.Context, p *session.CreateParams) error {
	if err := p.Validate(); err != nil {
		return fmt.Errorf("create session: %w", err)
	}
	se, now := &p.Session, s.d.time(p.Now)
	return s.db.Wrap("create session", s.db.Write(ctx, 1, func(c Conn) error {
		return run(ctx, c,
			step{"lock the sessions of the token", s.sql.lock, []any{"session", se.TokenName}},
			step{"insert session", s.sql.insert, []any{se.IDHash, se.TokenName, se.TokenFingerprint,
				s.d.time(se.CreatedAt), s.d.time(se.ExpiresAt)}},
			step{"end expired sessions of the token", s.sql.endExpired, []any{se.TokenName, now}},
			step{"prune expired sessions", s.sql.prune, []any{now, session.PruneBatch}},
			step{"end the oldest sessions of the token", s.sql.trim, []any{se.TokenName, p.MaxPerToken}})
	}))
}

// SessionGet reads a live session; see session.Store.
func (s *Sessions) SessionGet(ctx context.Context, idHash string, now time.Time) (*session.Session, error) {
	c, err := s.db.Read()
	if err != nil {
		return nil, s.db.Wrap("get session", err)
	}
	se := session.Session{IDHash: idHash}
	found, err := queryRow(ctx, c, s.sql.get, []any{idHash, s.d.time(now)},
		&se.TokenName, &se.TokenFingerprint, timeInto(&se.CreatedAt), timeInto(&se.ExpiresAt))
	switch {
	case err != nil:
		return nil, s.db.Wrap("get session", err)
	case !found:
		return nil, fmt.Errorf("get session: %w", job.ErrNotFound)
	}
	return &se, nil
}

// SessionExtend moves a live session's expiry; see session.Store.
func (s *Sessions) SessionExtend(ctx context.Context, idHash string, expiresAt, now time.Time) error {
	return s.db.Wrap("extend session", s.db.WriteAlone(ctx, func(c Conn) error {
		n, err := c.Exec(ctx, s.sql.extend, idHash, s.d.time(expiresAt), s.d.time(now))
		if err == nil && n == 0 {
			err = fmt.Errorf("session: %w", job.ErrNotFound)
		}
		return err
	}))
}

// SessionDelete ends a session; see session.Store.
func (s *Sessions) SessionDelete(ctx context.Context, idHash string) error {
	return s.db.Wrap("delete session", s.db.WriteAlone(ctx, func(c Conn) error {
		_, err := c.Exec(ctx, s.sql.del, idHash)
		return err
	}))
}
