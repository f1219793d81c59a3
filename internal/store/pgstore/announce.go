package pgstore

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/spoolq/spool/internal/job"
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
	connCfg *pgx.ConnConfig
	logger  *slog.Logger
	node    string // the sender of the notifications
	channel string // set once the store knows its schema

	mu      sync.Mutex
	byTx    map[pgx.Tx][]string // queues held for transactions not yet committed
	pending []string            // queues of committed transactions, not yet sent
	wake    chan struct{}       // one slot: pending has names
}

func newAnnouncer(connCfg *pgx.ConnConfig, node string, logger *slog.Logger) *announcer {
	return &announcer{connCfg: connCfg, node: node, logger: logger, byTx: make(map[pgx.Tx][]string), wake: make(chan struct{}, 1)}
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

// run sends what committed transactions announced until ctx
// ends, then what is left, for at most a second. It sends on a
// connection of its own, which commits without waiting for the WAL
// flush: a notification needs no durability, and the lock it takes is
// then held only for the commit itself.
func (a *announcer) run(ctx context.Context) {
	var conn *pgx.Conn
	defer func() {
		if conn != nil {
			conn.Close(context.Background())
		}
	}()
	send := func(ctx context.Context, queues []string) error {
		if conn == nil {
			c, err := a.conn(ctx)
			if err != nil {
				return err
			}
			conn = c
		}
		if err := a.send(ctx, conn, queues); err != nil {
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
			if queues := a.take(); len(queues) > 0 {
				last, cancel := context.WithTimeout(context.Background(), time.Second)
				_ = send(last, queues)
				cancel()
			}
			return
		case <-a.wake:
		}
		queues := a.take()
		if len(queues) == 0 {
			continue
		}
		sent := time.Now()
		if err := send(ctx, queues); err != nil {
			a.add(queues)
			if ctx.Err() != nil {
				continue
			}
			a.logger.Warn("pgstore: could not announce available jobs; trying again", "err", err, "queues", len(queues))
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

// conn opens the connection that sends announcements.
func (a *announcer) conn(ctx context.Context) (*pgx.Conn, error) {
	conn, err := pgx.ConnectConfig(ctx, a.connCfg.Copy())
	if err != nil {
		return nil, fmt.Errorf("connect: %w", err)
	}
	if _, err := conn.Exec(ctx, `SET synchronous_commit = off`); err != nil {
		conn.Close(context.Background())
		return nil, fmt.Errorf("relax commits: %w", err)
	}
	return conn, nil
}

// send notifies the other nodes that queues have available jobs, in one
// round trip.
func (a *announcer) send(ctx context.Context, conn *pgx.Conn, queues []string) error {
	batch := &pgx.Batch{}
	for _, p := range notifyPayloads(a.node, queues) {
		batch.Queue(sqlNotify, a.channel, p)
	}
	if err := conn.SendBatch(ctx, batch).Close(); err != nil {
		return fmt.Errorf("notify: %w", err)
	}
	return nil
}

// maxNotifyBytes keeps each NOTIFY payload under PostgreSQL's 8000-byte
// limit; more queues go out in several notifications.
const maxNotifyBytes = 7000

// notifyChunk is how many queues one notification that SQL builds may
// name, so that it stays under maxNotifyBytes whatever their names: a
// queue's name is at most job.MaxNameLength bytes, a consumer group's lane
// (job.LaneName) twice that and the separator, each name one more for the
// comma.
const notifyChunk = maxNotifyBytes / (2*job.MaxNameLength + len(job.LaneSep) + 1)

// sqlNotify sends the notification $2 on channel $1.
const sqlNotify = `SELECT pg_notify($1, $2)`

// notifyPayloads are the payloads that name queues for sender (a node's
// id, and a tag): the sender, a space, then queue names separated by
// commas (which names never hold).
func notifyPayloads(sender string, queues []string) []string {
	var out []string
	var b strings.Builder
	for _, q := range queues {
		if b.Len() > 0 && b.Len()+len(q)+1 > maxNotifyBytes {
			out = append(out, b.String())
			b.Reset()
		}
		if b.Len() == 0 {
			b.WriteString(sender)
			b.WriteByte(' ')
		} else {
			b.WriteByte(',')
		}
		b.WriteString(q)
	}
	if b.Len() > 0 {
		out = append(out, b.String())
	}
	return out
}
