package pgstore

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
)

// Leadership is held through a session-level advisory lock on a connection
// of its own. PostgreSQL releases the lock the moment that session ends: at
// once when the node's process dies (its socket closes), and within the
// server-side TCP keepalive (about ten seconds) when the node's machine or
// network vanishes. The holder pings its session every leaderPing and
// steps down when a ping fails, before the lock can pass to another node.
const (
	leaderPing        = time.Second
	leaderPingTimeout = 3 * time.Second
)

const (
	sqlTryLeader = `SELECT pg_try_advisory_lock($1, $2)`
	sqlUnlead    = `SELECT pg_advisory_unlock($1, $2)`
	// sqlKeepalive makes the server notice a vanished node in about ten
	// seconds instead of the operating system's two hours.
	sqlKeepalive = `SET tcp_keepalives_idle = 4; SET tcp_keepalives_interval = 2; SET tcp_keepalives_count = 3`
)

// LeaderLock elects one node among those sharing the store's schema. It is
// safe for use by one elector at a time.
type LeaderLock struct {
	db  *db
	key int32

	mu   sync.Mutex
	conn *pgx.Conn     // the session that holds, or tries for, the lock
	stop chan struct{} // closed to end the holder's watchdog
	done chan struct{} // closed when the watchdog has ended
}

// TryAcquire tries once to become the leader. It returns nil, nil when
// another node leads; otherwise a channel that is closed when leadership
// is lost (the session failed), until Release.
func (l *LeaderLock) TryAcquire(ctx context.Context) (<-chan struct{}, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.stop != nil {
		return nil, errors.New("acquire leadership: already held")
	}
	if l.conn == nil || l.conn.IsClosed() {
		conn, err := pgx.ConnectConfig(ctx, l.db.connCfg.Copy())
		if err != nil {
			return nil, fmt.Errorf("acquire leadership: %w", mapErr(err))
		}
		if _, err := conn.Exec(ctx, sqlKeepalive); err != nil {
			_ = conn.Close(context.Background())
			return nil, fmt.Errorf("acquire leadership: %w", mapErr(err))
		}
		l.conn = conn
	}
	var held bool
	if err := l.conn.QueryRow(ctx, sqlTryLeader, lockClass, l.key).Scan(&held); err != nil {
		l.closeConn()
		return nil, fmt.Errorf("acquire leadership: %w", mapErr(err))
	}
	if !held {
		return nil, nil
	}
	lost := make(chan struct{})
	l.stop, l.done = make(chan struct{}), make(chan struct{})
	go l.watch(l.conn, l.stop, l.done, lost)
	return lost, nil
}

// watch pings the leader's session until stop; when a ping fails it
// closes the session (which frees the lock if the server still has it)
// and reports the loss on lost.
func (l *LeaderLock) watch(conn *pgx.Conn, stop, done, lost chan struct{}) {
	defer close(done)
	t := time.NewTicker(leaderPing)
	defer t.Stop()
	for {
		select {
		case <-stop:
			return
		case <-t.C:
		}
		ctx, cancel := context.WithTimeout(context.Background(), leaderPingTimeout)
		err := conn.Ping(ctx)
		cancel()
		if err != nil {
			l.db.logger.Warn("pgstore: leader session failed; stepping down", "err", err)
			_ = conn.Close(context.Background())
			close(lost)
			return
		}
	}
}

// Release gives leadership up (if held) and closes the session.
// Idempotent.
func (l *LeaderLock) Release() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.stop != nil {
		close(l.stop)
		<-l.done
		l.stop, l.done = nil, nil
		if l.conn != nil && !l.conn.IsClosed() {
			ctx, cancel := context.WithTimeout(context.Background(), leaderPingTimeout)
			_, _ = l.conn.Exec(ctx, sqlUnlead, lockClass, l.key)
			cancel()
		}
	}
	l.closeConn()
}

// closeConn closes the session, which frees the lock if it holds it.
func (l *LeaderLock) closeConn() {
	if l.conn != nil {
		_ = l.conn.Close(context.Background())
		l.conn = nil
	}
}
