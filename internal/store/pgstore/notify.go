package pgstore

import (
	"context"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/spoolq/spool/internal/job"
)

// maxNotifyBytes keeps each NOTIFY payload under PostgreSQL's 8000-byte
// limit; more queues go out in several notifications.
const maxNotifyBytes = 7000

// notifyChunk is how many queues one notification that SQL builds may
// name, so that it stays under maxNotifyBytes whatever their names: a
// queue's name is at most job.MaxNameLength bytes, a consumer group's lane
// (job.LaneName) twice that and the separator, each name one more for the
// comma.
const notifyChunk = maxNotifyBytes / (2*job.MaxNameLength + len(job.LaneSep) + 1)

// notifyPayloads are the payloads that announce queues: this node's id, a
// space, then queue names separated by commas (which names never hold).
func (s *Store) notifyPayloads(queues []string) []string {
	var out []string
	var b strings.Builder
	for _, q := range queues {
		if b.Len() > 0 && b.Len()+len(q)+1 > maxNotifyBytes {
			out = append(out, b.String())
			b.Reset()
		}
		if b.Len() == 0 {
			b.WriteString(s.node)
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

// announceOnCommit records that tx made jobs available in queues. The
// notifications go out once tx has committed (see announcer), and not at
// all if it rolls back.
func (s *Store) announceOnCommit(tx pgx.Tx, queues []string) {
	s.ann.hold(tx, queues)
}

// listen holds a connection that LISTENs on the schema's channel and hands
// the queues other nodes announce to Hooks.OnAvailable, until ctx ends. It
// reconnects after any failure; on every (re)connect it announces every
// known queue, since notifications sent while it was not listening are
// lost.
func (s *Store) listen(ctx context.Context) {
	wait := 100 * time.Millisecond
	failures := 0
	for ctx.Err() == nil {
		started := time.Now()
		err := s.listenOnce(ctx)
		if ctx.Err() != nil {
			return
		}
		if time.Since(started) > 10*time.Second {
			failures, wait = 0, 100*time.Millisecond // it had been listening: a fresh failure
		}
		if failures++; failures == 1 || failures%30 == 0 {
			s.logger.Warn("pgstore: listener lost its connection; reconnecting", "err", err, "failures", failures)
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(wait):
		}
		wait = min(wait*2, time.Second)
	}
}

func (s *Store) listenOnce(ctx context.Context) error {
	conn, err := pgx.ConnectConfig(ctx, s.connCfg.Copy())
	if err != nil {
		return err
	}
	defer conn.Close(context.Background())
	if _, err := conn.Exec(ctx, "LISTEN "+pgx.Identifier{s.channel}.Sanitize()); err != nil {
		return err
	}
	// Inserts announce to this node from here on (listeners.go); the look
	// at every queue below comes after.
	if err := s.joinListeners(ctx, conn); err != nil {
		return err
	}
	rows, err := conn.Query(ctx, `SELECT name FROM spool_queues`)
	if err != nil {
		return err
	}
	names, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return err
	}
	if len(names) > 0 {
		s.forgetPlain(names)
		s.cfg.Hooks.OnAvailable(names)
	}
	// Whatever changed while no one listened is forgotten; from here on,
	// every change comes in as a notification.
	s.defaults.forget(nil)
	s.forgetWaits()
	s.defaults.listening.Store(true)
	defer s.defaults.listening.Store(false)
	s.groupsDeleted(nil)
	for {
		n, err := conn.WaitForNotification(ctx)
		if err != nil {
			return err
		}
		node, tag, queues, ok := readNotification(n.Payload)
		if !ok || node == s.node {
			continue
		}
		switch tag {
		case "":
			s.forgetPlain(queues)
			s.cfg.Hooks.OnAvailable(queues)
		case settingsTag:
			s.defaults.forget(queues)
			s.forgetWaits()
		case groupsTag:
			s.groupsDeleted(queues)
		}
	}
}

// groupsDeleted hands the lanes of consumer groups another node deleted
// (nil: any may have been) to Hooks.OnConsumerGroupsDeleted, if set.
func (s *Store) groupsDeleted(lanes []string) {
	if h := s.cfg.Hooks.OnConsumerGroupsDeleted; h != nil {
		h(lanes)
	}
}
