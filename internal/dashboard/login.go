package dashboard

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"net/netip"
	"strings"
	"time"

	"github.com/spoolq/spool/internal/httpapi/auth"
	"github.com/spoolq/spool/internal/job"
	"github.com/spoolq/spool/internal/session"
)

// A login makes a server-side session: the cookie holds a random 256-bit
// id and nothing else, the store (shared by every node) keeps the id's
// SHA-256 with the token's name and fingerprint, and a logout deletes it,
// so the cookie's value is refused afterwards on every node.
const (
	// sessionCookie is the cookie that holds a session's id.
	sessionCookie = "spool_session"
	// legacyCookie held a token's secret in earlier versions; a login or
	// logout clears it.
	legacyCookie = "spool_token"
	// sessionIDBytes is the size of a session's random id.
	sessionIDBytes = 32
	// SessionIdle ends a session that no page has used for that long.
	SessionIdle = 12 * time.Hour
	// SessionLifetime ends every session that long after its login,
	// however much it is used.
	SessionLifetime = 7 * 24 * time.Hour
	// sessionExtendEvery bounds the writes that keep a used session
	// alive: its idle expiry moves only once it is that much behind.
	sessionExtendEvery = time.Minute
	// MaxSessionsPerToken bounds the live sessions of one token: a login
	// beyond it ends the token's oldest session.
	MaxSessionsPerToken = 50
)

// sessionExpiry is when a session created at created and used at now
// ends unless used again: idle after SessionIdle, and never later than
// SessionLifetime after its login.
func sessionExpiry(created, now time.Time) time.Time {
	idle, absolute := now.Add(SessionIdle), created.Add(SessionLifetime)
	if idle.Before(absolute) {
		return idle
	}
	return absolute
}

// sessionHash is the store's key of a cookie's session id: the SHA-256 of
// the id, in hex; ok is false for a value that is no session id.
func sessionHash(value string) (hash string, ok bool) {
	id, err := base64.RawURLEncoding.DecodeString(value)
	if err != nil || len(id) != sessionIDBytes {
		return "", false
	}
	sum := sha256.Sum256(id)
	return hex.EncodeToString(sum[:]), true
}

// startSession stores a new session of p and returns the cookie's value.
func (d *Dashboard) startSession(ctx context.Context, p *auth.Principal) (string, error) {
	var id [sessionIDBytes]byte
	if _, err := rand.Read(id[:]); err != nil {
		return "", fmt.Errorf("make a session id: %w", err)
	}
	value := base64.RawURLEncoding.EncodeToString(id[:])
	hash, _ := sessionHash(value)
	now := d.engine.Now()
	err := d.opts.Sessions.SessionCreate(ctx, &session.CreateParams{
		Session: session.Session{IDHash: hash, TokenName: p.Name(), TokenFingerprint: d.opts.Auth.Fingerprint(p),
			CreatedAt: now, ExpiresAt: sessionExpiry(now, now)},
		MaxPerToken: d.opts.MaxSessionsPerToken,
		Now:         now,
	})
	if err != nil {
		return "", fmt.Errorf("store session: %w", err)
	}
	return value, nil
}

// principal is the token of r's session, nil when r has no live session
// or its token was removed or its secret changed since the login (that
// session is then ended). A session in use has its idle expiry moved.
func (d *Dashboard) principal(r *http.Request) (*auth.Principal, error) {
	c, err := r.Cookie(sessionCookie)
	if err != nil {
		return nil, nil
	}
	hash, ok := sessionHash(c.Value)
	if !ok {
		return nil, nil
	}
	ctx, now := r.Context(), d.engine.Now()
	se, err := d.opts.Sessions.SessionGet(ctx, hash, now)
	if errors.Is(err, job.ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read session: %w", err)
	}
	p := d.opts.Auth.Session(se.TokenName, se.TokenFingerprint)
	if p == nil {
		if err := d.opts.Sessions.SessionDelete(ctx, hash); err != nil {
			return nil, fmt.Errorf("end the session of a token no longer configured: %w", err)
		}
		return nil, nil
	}
	if next := sessionExpiry(se.CreatedAt, now); next.Sub(se.ExpiresAt) >= sessionExtendEvery {
		err := d.opts.Sessions.SessionExtend(ctx, hash, next, now)
		if errors.Is(err, job.ErrNotFound) {
			return nil, nil // ended meanwhile, by a logout on another tab or node
		}
		if err != nil {
			return nil, fmt.Errorf("extend session: %w", err)
		}
	}
	return p, nil
}

// endSession deletes the session of r's cookie, if it has one.
func (d *Dashboard) endSession(r *http.Request) error {
	c, err := r.Cookie(sessionCookie)
	if err != nil || d.opts.Sessions == nil {
		return nil
	}
	hash, ok := sessionHash(c.Value)
	if !ok {
		return nil
	}
	if err := d.opts.Sessions.SessionDelete(r.Context(), hash); err != nil {
		return fmt.Errorf("end session: %w", err)
	}
	return nil
}

// setSessionCookie sets (value not empty) or clears the session cookie:
// HttpOnly, SameSite=Strict, for every path, and Secure when r came over
// HTTPS. It clears the legacy cookie too.
func (d *Dashboard) setSessionCookie(w http.ResponseWriter, r *http.Request, value string) {
	secure := d.overHTTPS(r)
	c := &http.Cookie{Name: sessionCookie, Value: value, Path: "/", HttpOnly: true, Secure: secure, SameSite: http.SameSiteStrictMode}
	if value == "" {
		c.MaxAge = -1
	}
	http.SetCookie(w, c)
	if _, err := r.Cookie(legacyCookie); err == nil {
		http.SetCookie(w, &http.Cookie{Name: legacyCookie, Path: "/", MaxAge: -1, HttpOnly: true, Secure: secure, SameSite: http.SameSiteStrictMode})
	}
}

// overHTTPS reports whether r came over HTTPS: on a TLS connection, or
// from a trusted proxy (Options.TrustedProxies) whose X-Forwarded-Proto
// says https. The header of any other peer is not believed: a client could
// send it.
func (d *Dashboard) overHTTPS(r *http.Request) bool {
	if r.TLS != nil {
		return true
	}
	if len(d.opts.TrustedProxies) == 0 {
		return false
	}
	peer, err := netip.ParseAddrPort(r.RemoteAddr)
	if err != nil {
		return false
	}
	ip := peer.Addr().Unmap()
	trusted := false
	for _, pr := range d.opts.TrustedProxies {
		trusted = trusted || pr.Contains(ip)
	}
	if !trusted {
		return false
	}
	// The last value is the one the trusted proxy set or appended.
	values := r.Header.Values("X-Forwarded-Proto")
	if len(values) == 0 {
		return false
	}
	last := values[len(values)-1]
	if i := strings.LastIndexByte(last, ','); i >= 0 {
		last = last[i+1:]
	}
	return strings.EqualFold(strings.TrimSpace(last), "https")
}
