package pgstore

// A fast insert (insertFast) announces its jobs only when another node
// listens: a node alone on its schema then spends no round trip, no
// notifying transaction and no wake-up of listening sessions per insert.
// spool_listeners lists the listening nodes, and the listeners' lock
// (listenersLock) orders a node's joining with the inserts under way:
//
//   - an insert holds the lock shared from its first statement
//     (sqlFastBegin), and only then, in the snapshot of its next
//     statement, reads whether another node is listed;
//   - a node that joins, once it LISTENs, takes the lock exclusively, which
//     waits for every insert that holds it to end, lists itself, commits,
//     and only then looks at every queue.
//
// So an insert that found no other node either ended before the joining
// node took the lock, and the node's look at every queue sees its jobs,
// or read the list after the node's row was committed, and found it. A
// row whose listening session is gone is removed when a node joins and by
// the leader's pruning (JobPrune); until then the other nodes announce to
// it, which costs them time, never a job.
const (
	// listenersLock names the listeners' lock.
	listenersLock = "listeners"
	// sqlLockListeners takes the listeners' lock ($1, $2) exclusively for
	// a joining node's transaction.
	sqlLockListeners = `SELECT pg_advisory_xact_lock($1, $2)`
	// sqlPruneListeners removes the rows of listening sessions that are
	// gone: their nodes list themselves again when they listen again.
	sqlPruneListeners = `DELETE FROM spool_listeners WHERE pid NOT IN (SELECT pid FROM pg_stat_activity WHERE pid IS NOT NULL)`
	// sqlListListener lists node $1 as listening in this session.
	sqlListListener = `INSERT INTO spool_listeners (node, pid) VALUES ($1, pg_backend_pid())
ON CONFLICT (node) DO UPDATE SET pid = excluded.pid`
)
