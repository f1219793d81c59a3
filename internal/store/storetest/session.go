package storetest

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"time"

	"github.com/spoolq/spool/internal/job"
	"github.com/spoolq/spool/internal/session"
)

func sessionTests() []group {
	return []group{{"Sessions", []test{
		{"CreateThenGetWhileLive", testSessionCreateGet},
		{"ExtendMovesTheExpiryOfALiveSessionOnly", testSessionExtend},
		{"DeleteEndsASession", testSessionDelete},
		{"CapEndsTheOldestSessionsOfAToken", testSessionCap},
		{"CreatePrunesExpiredSessions", testSessionPrune},
		{"RefusedCreateChangesNothing", testSessionRefused},
	}}}
}

// newSession is a session of token created at created and live for life.
func newSession(name, token string, created time.Time, life time.Duration) session.Session {
	sum := sha256.Sum256([]byte(name))
	return session.Session{IDHash: hex.EncodeToString(sum[:]), TokenName: token, TokenFingerprint: "fp-" + token,
		CreatedAt: created, ExpiresAt: created.Add(life)}
}

// createSession stores se at now under a cap of max sessions per token.
func (b *bundle) createSession(se session.Session, max int, now time.Time) {
	b.t.Helper()
	if err := b.s.SessionCreate(b.ctx, &session.CreateParams{Session: se, MaxPerToken: max, Now: now}); err != nil {
		b.t.Fatalf("create session %s: %v", se.IDHash[:8], err)
	}
}

// sessionAt is the session of idHash live at now, nil when there is none.
func (b *bundle) sessionAt(idHash string, now time.Time) *session.Session {
	b.t.Helper()
	se, err := b.s.SessionGet(b.ctx, idHash, now)
	if errors.Is(err, job.ErrNotFound) {
		return nil
	}
	if err != nil {
		b.t.Fatalf("get session %s: %v", idHash[:8], err)
	}
	return se
}

func testSessionCreateGet(b *bundle) {
	se := newSession("s1", "ops", at(0), time.Hour)
	b.createSession(se, 10, at(0))
	got := b.sessionAt(se.IDHash, at(30*time.Minute))
	if got == nil {
		b.t.Fatal("a live session was not found")
	}
	if got.IDHash != se.IDHash || got.TokenName != "ops" || got.TokenFingerprint != "fp-ops" ||
		!got.CreatedAt.Equal(se.CreatedAt) || !got.ExpiresAt.Equal(se.ExpiresAt) {
		b.t.Errorf("got %+v, want %+v", got, se)
	}
	if b.sessionAt(se.IDHash, at(time.Hour)) != nil {
		b.t.Error("a session was found at its expiry")
	}
	if b.sessionAt(newSession("other", "ops", at(0), time.Hour).IDHash, at(0)) != nil {
		b.t.Error("a session that was never created was found")
	}
	if b.h.Reopen != nil {
		b.reopen()
		if b.sessionAt(se.IDHash, at(time.Minute)) == nil {
			b.t.Error("a live session did not survive a restart")
		}
	}
}

func testSessionExtend(b *bundle) {
	se := newSession("s1", "ops", at(0), time.Hour)
	b.createSession(se, 10, at(0))
	if err := b.s.SessionExtend(b.ctx, se.IDHash, at(3*time.Hour), at(50*time.Minute)); err != nil {
		b.t.Fatalf("extend a live session: %v", err)
	}
	if got := b.sessionAt(se.IDHash, at(2*time.Hour)); got == nil || !got.ExpiresAt.Equal(at(3*time.Hour)) {
		b.t.Fatalf("after the extension: %+v, want it live until %v", got, at(3*time.Hour))
	}
	err := b.s.SessionExtend(b.ctx, se.IDHash, at(9*time.Hour), at(3*time.Hour))
	if !errors.Is(err, job.ErrNotFound) {
		b.t.Errorf("extend a session at its expiry: %v, want job.ErrNotFound", err)
	}
	if got := b.sessionAt(se.IDHash, at(2*time.Hour)); got == nil || !got.ExpiresAt.Equal(at(3*time.Hour)) {
		b.t.Errorf("a refused extension moved the expiry: %+v", got)
	}
	unknown := newSession("unknown", "ops", at(0), time.Hour)
	if err := b.s.SessionExtend(b.ctx, unknown.IDHash, at(time.Hour), at(0)); !errors.Is(err, job.ErrNotFound) {
		b.t.Errorf("extend an unknown session: %v, want job.ErrNotFound", err)
	}
	if b.sessionAt(unknown.IDHash, at(0)) != nil {
		b.t.Error("extending an unknown session created it")
	}
}

func testSessionDelete(b *bundle) {
	se := newSession("s1", "ops", at(0), time.Hour)
	kept := newSession("s2", "ops", at(0), time.Hour)
	b.createSession(se, 10, at(0))
	b.createSession(kept, 10, at(0))
	if err := b.s.SessionDelete(b.ctx, se.IDHash); err != nil {
		b.t.Fatalf("delete: %v", err)
	}
	if b.sessionAt(se.IDHash, at(time.Minute)) != nil {
		b.t.Error("a deleted session was found")
	}
	if err := b.s.SessionExtend(b.ctx, se.IDHash, at(2*time.Hour), at(time.Minute)); !errors.Is(err, job.ErrNotFound) {
		b.t.Errorf("extend a deleted session: %v, want job.ErrNotFound", err)
	}
	if err := b.s.SessionDelete(b.ctx, se.IDHash); err != nil {
		b.t.Errorf("delete it again: %v, want no error", err)
	}
	if b.sessionAt(kept.IDHash, at(time.Minute)) == nil {
		b.t.Error("deleting one session ended another")
	}
}

func testSessionCap(b *bundle) {
	var ops []session.Session
	for i := range 5 {
		se := newSession(fmt.Sprint("ops", i), "ops", at(time.Duration(i)*time.Minute), time.Hour)
		ops = append(ops, se)
		b.createSession(se, 3, se.CreatedAt)
	}
	other := newSession("other", "viewer", at(0), time.Hour)
	b.createSession(other, 3, at(5*time.Minute))
	for i, se := range ops {
		live := b.sessionAt(se.IDHash, at(5*time.Minute)) != nil
		if want := i >= 2; live != want {
			b.t.Errorf("session %d of 5 under a cap of 3: live %v, want %v", i, live, want)
		}
	}
	if b.sessionAt(other.IDHash, at(5*time.Minute)) == nil {
		b.t.Error("the cap of one token ended a session of another")
	}
	// Sessions created in the same instant: the cap still holds.
	for i := range 4 {
		b.createSession(newSession(fmt.Sprint("same", i), "same", at(time.Minute), time.Hour), 2, at(time.Minute))
	}
	live := 0
	for i := range 4 {
		if b.sessionAt(newSession(fmt.Sprint("same", i), "same", at(0), 0).IDHash, at(time.Minute)) != nil {
			live++
		}
	}
	if live != 2 {
		b.t.Errorf("%d sessions of one instant live under a cap of 2", live)
	}
}

func testSessionPrune(b *bundle) {
	var short []session.Session
	for i := range 3 {
		se := newSession(fmt.Sprint("short", i), fmt.Sprint("tok", i%2), at(0), time.Minute)
		short = append(short, se)
		b.createSession(se, 10, at(0))
	}
	long := newSession("long", "tok0", at(0), time.Hour)
	b.createSession(long, 10, at(0))
	// A login after they expired deletes them, whatever their token.
	b.createSession(newSession("later", "tok9", at(2*time.Minute), time.Hour), 10, at(2*time.Minute))
	for i, se := range short {
		if b.sessionAt(se.IDHash, at(0)) != nil {
			b.t.Errorf("expired session %d is still stored after a later login", i)
		}
	}
	if b.sessionAt(long.IDHash, at(2*time.Minute)) == nil {
		b.t.Error("a login deleted a live session of another token")
	}
}

func testSessionRefused(b *bundle) {
	se := newSession("s1", "ops", at(0), time.Hour)
	b.createSession(se, 10, at(0))
	for name, p := range map[string]session.CreateParams{
		"the same id":      {Session: newSession("s1", "viewer", at(time.Minute), time.Hour), MaxPerToken: 10, Now: at(time.Minute)},
		"expired at birth": {Session: newSession("s2", "ops", at(0), time.Minute), MaxPerToken: 10, Now: at(time.Minute)},
		"no cap":           {Session: newSession("s3", "ops", at(0), time.Hour), MaxPerToken: 0, Now: at(0)},
	} {
		if err := b.s.SessionCreate(b.ctx, &p); err == nil {
			b.t.Errorf("a create with %s was accepted", name)
		}
	}
	got := b.sessionAt(se.IDHash, at(time.Minute))
	if got == nil || got.TokenName != "ops" {
		b.t.Errorf("after the refused creates: %+v, want the first session as it was", got)
	}
	if b.sessionAt(newSession("s2", "ops", at(0), 0).IDHash, at(0)) != nil || b.sessionAt(newSession("s3", "ops", at(0), 0).IDHash, at(0)) != nil {
		b.t.Error("a refused create stored its session")
	}
}
