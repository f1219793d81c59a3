package pgstore

import (
	"context"
	"io"
	"log/slog"
	"maps"
	"slices"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/spoolq/spool/internal/pgtest"
	"github.com/spoolq/spool/internal/store"
)

// A node alone on its schema, listening itself, announces none of its
// fast inserts; once another node listens, it announces them and the
// other node is woken.
func TestFastInsertsAnnounceOnlyToOtherNodes(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	url := pgtest.Schema(t)
	s, err := Open(ctx, Config{URL: url, Migrate: true, Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
		Hooks: store.Hooks{OnAvailable: func([]string) {}}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	// A session that listens without being a node hears every
	// notification sent.
	raw, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { raw.Close(context.Background()) })
	if _, err := raw.Exec(ctx, "LISTEN "+pgx.Identifier{s.channel}.Sanitize()); err != nil {
		t.Fatal(err)
	}
	waitListed(t, raw, s.node)

	mustInsert(t, s, groupJobs("alone", "", 1))
	next := listenOn(t, url, s)
	mustInsert(t, s, groupJobs("heard", "", 1))
	if qs := next(); !slices.Equal(qs, []string{"heard"}) {
		t.Fatalf("the other node was woken for %v, want [heard]", qs)
	}
	for {
		wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		n, err := raw.WaitForNotification(wctx)
		cancel()
		if err != nil {
			t.Fatalf("no announcement of queue heard: %v", err)
		}
		_, _, qs, _ := readNotification(n.Payload)
		if slices.Contains(qs, "alone") {
			t.Fatalf("the insert made while no other node listened was announced: %q", n.Payload)
		}
		if slices.Contains(qs, "heard") {
			return
		}
	}
}

// A node joins the listeners only once the inserts that hold the
// listeners' lock have ended, lists itself with its listening session,
// and removes the rows of sessions that are gone.
func TestJoiningWaitsForInsertsUnderWay(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	url := pgtest.Schema(t)
	s := open(t, url)
	insert := connect(t, url)
	joining := connect(t, url)
	listGoneAndAlive(t, insert)
	tx, err := insert.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(ctx, sqlFastBegin, lockClass, s.lockKey(listenersLock), []string{"q"}, false); err != nil {
		t.Fatal(err)
	}
	joined := make(chan error, 1)
	go func() { joined <- s.joinListeners(ctx, joining) }()
	select {
	case err := <-joined:
		t.Fatalf("the node joined while an insert held the listeners' lock (err %v)", err)
	case <-time.After(300 * time.Millisecond):
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-joined:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the node did not join after the insert ended")
	}
	want := map[string]uint32{"alive": insert.PgConn().PID(), s.node: joining.PgConn().PID()}
	if got := listeners(t, insert); !maps.Equal(got, want) {
		t.Fatalf("listed %v, want %v", got, want)
	}
}

// The leader's pruning removes the rows of listening sessions that are
// gone and keeps the others.
func TestPruneDropsListenersThatAreGone(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	url := pgtest.Schema(t)
	s := open(t, url)
	conn := connect(t, url)
	listGoneAndAlive(t, conn)
	if _, err := s.JobPrune(ctx, &store.JobPruneParams{Limit: 10, Now: t0}); err != nil {
		t.Fatal(err)
	}
	want := map[string]uint32{"alive": conn.PgConn().PID()}
	if got := listeners(t, conn); !maps.Equal(got, want) {
		t.Fatalf("listed after pruning: %v, want %v", got, want)
	}
}

// listGoneAndAlive lists two nodes: gone, whose session is no more, and
// alive, listening in conn's session.
func listGoneAndAlive(t *testing.T, conn *pgx.Conn) {
	t.Helper()
	_, err := conn.Exec(context.Background(),
		`INSERT INTO spool_listeners (node, pid) VALUES ('gone', -1), ('alive', pg_backend_pid())`)
	if err != nil {
		t.Fatal(err)
	}
}

// listeners reads the listed nodes and their sessions' process ids.
func listeners(t *testing.T, conn *pgx.Conn) map[string]uint32 {
	t.Helper()
	rows, err := conn.Query(context.Background(), `SELECT node, pid FROM spool_listeners`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	out := map[string]uint32{}
	for rows.Next() {
		var node string
		var pid int32
		if err := rows.Scan(&node, &pid); err != nil {
			t.Fatal(err)
		}
		out[node] = uint32(pid)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

func connect(t *testing.T, url string) *pgx.Conn {
	t.Helper()
	conn, err := pgx.Connect(context.Background(), url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close(context.Background()) })
	return conn
}

// waitListed waits until node is listed as listening.
func waitListed(t *testing.T, conn *pgx.Conn, node string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		var listed bool
		err := conn.QueryRow(context.Background(), `SELECT EXISTS (SELECT FROM spool_listeners WHERE node = $1)`, node).Scan(&listed)
		if err != nil {
			t.Fatal(err)
		}
		if listed {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("node %s is not listed as listening", node)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
