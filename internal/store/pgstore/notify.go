package pgstore

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/spoolq/spool/internal/store"
)

// listener hears what other nodes announce: available jobs, changed
// settings and deleted consumer groups.
type listener struct {
	*db
	*beliefs
	hooks store.Hooks
}

// listen holds a connection that LISTENs on the schema's channel and hands
// the queues other nodes announce to Hooks.OnAvailable, until ctx ends. It
// reconnects after any failure; on every (re)connect it announces every
// known queue, since notifications sent while it was not listening are
// lost.
func (l *listener) listen(ctx context.Context) {
	wait := 100 * time.Millisecond
	failures := 0
	for ctx.Err() == nil {
		started := time.Now()
		err := l.listenOnce(ctx)
		if ctx.Err() != nil {
			return
		}
		if time.Since(started) > 10*time.Second {
			failures, wait = 0, 100*time.Millisecond // it had been listening: a fresh failure
		}
		if failures++; failures == 1 || failures%30 == 0 {
			l.logger.Warn("pgstore: listener lost its connection; reconnecting", "err", err, "failures", failures)
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(wait):
		}
		wait = min(wait*2, time.Second)
	}
}

func (l *listener) listenOnce(ctx context.Context) error {
	conn, err := pgx.ConnectConfig(ctx, l.connCfg.Copy())
	if err != nil {
		return err
	}
	defer conn.Close(context.Background())
	if _, err := conn.Exec(ctx, "LISTEN "+pgx.Identifier{l.channel}.Sanitize()); err != nil {
		return err
	}
	// Inserts announce to this node from here on (listeners.go); the look
	// at every queue below comes after.
	if err := l.joinListeners(ctx, conn); err != nil {
		return err
	}
	names, err := collect[string](ctx, conn, `SELECT name FROM spool_queues`)
	if err != nil {
		return err
	}
	// Whatever changed while no one listened is forgotten; from here on,
	// every change comes in as a notification.
	l.forgetAll(names)
	if len(names) > 0 {
		l.hooks.OnAvailable(names)
	}
	l.defaults.listening.Store(true)
	defer l.defaults.listening.Store(false)
	l.groupsDeleted(nil)
	for {
		n, err := conn.WaitForNotification(ctx)
		if err != nil {
			return err
		}
		node, tag, queues, ok := readNotification(n.Payload)
		if !ok || node == l.node {
			continue
		}
		l.heard(tag, queues)
		switch tag {
		case "":
			l.hooks.OnAvailable(queues)
		case groupsTag:
			l.groupsDeleted(queues)
		}
	}
}

// groupsDeleted hands the lanes of consumer groups another node deleted
// (nil: any may have been) to Hooks.OnConsumerGroupsDeleted, if set.
func (l *listener) groupsDeleted(lanes []string) {
	if h := l.hooks.OnConsumerGroupsDeleted; h != nil {
		h(lanes)
	}
}

// joinListeners lists this node as listening on conn, which LISTENs
// already, in one transaction that waits for the inserts under way.
func (l *listener) joinListeners(ctx context.Context, conn *pgx.Conn) error {
	batch := &pgx.Batch{}
	batch.Queue(sqlLockListeners, lockClass, l.lockKey(listenersLock))
	batch.Queue(sqlPruneListeners)
	batch.Queue(sqlListListener, l.node)
	if err := conn.SendBatch(ctx, batch).Close(); err != nil {
		return fmt.Errorf("join the listeners: %w", err)
	}
	return nil
}
