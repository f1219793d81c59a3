package pgstore

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5"
)

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
	// Whatever changed while no one listened is forgotten; from here on,
	// every change comes in as a notification.
	s.forgetAll(names)
	if len(names) > 0 {
		s.cfg.Hooks.OnAvailable(names)
	}
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
		s.heard(tag, queues)
		switch tag {
		case "":
			s.cfg.Hooks.OnAvailable(queues)
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
