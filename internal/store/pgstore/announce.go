package pgstore

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
)

// announcer sends the notifications that queues got available jobs
// (notifyPayloads) after the transactions that made them available have
// committed, from a goroutine of its own, in transactions that commit
// without waiting for the WAL flush.
//
// A transaction that sends NOTIFY holds a lock on the whole database's
// notification queue from just before its commit until the commit is on
// disk, so every transaction that notifies commits after the one before
// it has synced: inserts that notified in their own transactions could
// never share PostgreSQL's group commit. Sent afterwards, they name the
// queues of every commit that ended while the previous send was under
// way, so their number does not grow with the rate of commits.
//
// An announcement can come later than its commit, never before it: a
// node that claims on a notification finds the jobs. One that fails to
// go out is sent again; if the node stops first, the other nodes find
// the jobs on their next claim (their listeners announce every queue on
// every reconnect). A fast insert hands its queues over only when
// another node listens (listeners.go).
type announcer struct {
	mu      sync.Mutex
	byTx    map[pgx.Tx][]string // queues held for transactions not yet committed
	pending []string            // queues of committed transactions, not yet sent
	wake    chan struct{}       // one slot: pending has names
}

func newAnnouncer() *announcer {
	return &announcer{byTx: make(map[pgx.Tx][]string), wake: make(chan struct{}, 1)}
}

// hold records queues for tx until settle.
func (a *announcer) hold(tx pgx.Tx, queues []string) {
	if len(queues) == 0 {
		return
	}
	a.mu.Lock()
	a.byTx[tx] = append(a.byTx[tx], queues...)
	a.mu.Unlock()
}

// settle ends tx's hold: when it committed, its queues are sent.
func (a *announcer) settle(tx pgx.Tx, committed bool) {
	if tx == nil {
		return
	}
	a.mu.Lock()
	queues, ok := a.byTx[tx]
	if ok {
		delete(a.byTx, tx)
	}
	a.mu.Unlock()
	if ok && committed {
		a.add(queues)
	}
}

// add queues to the next send.
func (a *announcer) add(queues []string) {
	a.mu.Lock()
	for _, q := range queues {
		if !slices.Contains(a.pending, q) {
			a.pending = append(a.pending, q)
		}
	}
	a.mu.Unlock()
	select {
	case a.wake <- struct{}{}:
	default:
	}
}

// take returns and clears the queues to send.
func (a *announcer) take() []string {
	a.mu.Lock()
	defer a.mu.Unlock()
	queues := a.pending
	a.pending = nil
	return queues
}

// announceSpacing is the least time between two sends of
// announcements: commits that end within it share one send, so that the
// sends cost the database a bounded share of its work however fast jobs
// come. It is what another node's parked fetch may wait at most, beyond
// the round trips, to hear of a job.
const announceSpacing = time.Millisecond

// announceLoop sends what committed transactions announced until ctx
// ends, then what is left, for at most a second. It sends on a
// connection of its own, which commits without waiting for the WAL
// flush: a notification needs no durability, and the lock it takes is
// then held only for the commit itself.
func (d *db) announceLoop(ctx context.Context) {
	var conn *pgx.Conn
	defer func() {
		if conn != nil {
			conn.Close(context.Background())
		}
	}()
	send := func(ctx context.Context, queues []string) error {
		if conn == nil {
			c, err := d.announceConn(ctx)
			if err != nil {
				return err
			}
			conn = c
		}
		if err := d.sendAnnouncements(ctx, conn, queues); err != nil {
			conn.Close(context.Background())
			conn = nil
			return err
		}
		return nil
	}
	wait := 50 * time.Millisecond
	for {
		select {
		case <-ctx.Done():
			if queues := d.ann.take(); len(queues) > 0 {
				last, cancel := context.WithTimeout(context.Background(), time.Second)
				_ = send(last, queues)
				cancel()
			}
			return
		case <-d.ann.wake:
		}
		queues := d.ann.take()
		if len(queues) == 0 {
			continue
		}
		sent := time.Now()
		if err := send(ctx, queues); err != nil {
			d.ann.add(queues)
			if ctx.Err() != nil {
				continue
			}
			d.logger.Warn("pgstore: could not announce available jobs; trying again", "err", err, "queues", len(queues))
			sleep(ctx, wait)
			wait = min(wait*2, time.Second)
			continue
		}
		wait = 50 * time.Millisecond
		sleep(ctx, announceSpacing-time.Since(sent))
	}
}

// sleep waits d or until ctx ends.
func sleep(ctx context.Context, d time.Duration) {
	if d <= 0 {
		return
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}

// announceConn opens the connection that sends announcements.
func (d *db) announceConn(ctx context.Context) (*pgx.Conn, error) {
	conn, err := pgx.ConnectConfig(ctx, d.connCfg.Copy())
	if err != nil {
		return nil, fmt.Errorf("connect: %w", err)
	}
	if _, err := conn.Exec(ctx, `SET synchronous_commit = off`); err != nil {
		conn.Close(context.Background())
		return nil, fmt.Errorf("relax commits: %w", err)
	}
	return conn, nil
}

// sendAnnouncements notifies the other nodes that queues have available
// jobs, in one round trip.
func (d *db) sendAnnouncements(ctx context.Context, conn *pgx.Conn, queues []string) error {
	batch := &pgx.Batch{}
	for _, p := range notifyPayloads(d.node, queues) {
		batch.Queue(sqlNotify, d.channel, p)
	}
	if err := conn.SendBatch(ctx, batch).Close(); err != nil {
		return fmt.Errorf("notify: %w", err)
	}
	return nil
}
