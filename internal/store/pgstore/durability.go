package pgstore

import "github.com/spoolq/spool/internal/job"

// Durability in PostgreSQL. Every job row carries its level, full or
// process; the store holds no memory jobs, which live in an in-memory
// tier that only the embedded store has.
//
// A full job's changes commit with synchronous_commit on (the server's
// setting, which Spool expects to be on): the call answers once the
// commit is flushed to disk. An insert, complete, fail, release or
// transaction (JobTransact) whose writes all concern process jobs commits
// with synchronous_commit off instead: it answers once the commit is in
// PostgreSQL's WAL buffers, so it
// survives a crash of the Spool node, but a crash of PostgreSQL or of its
// machine loses the commits the WAL writer has not flushed yet (those of
// about the last three wal_writer_delay). A transaction that also writes a
// full job, and every claim, extend and maintenance pass, keeps
// synchronous_commit on; a later synchronous commit flushes the relaxed ones
// before it, so only the newest commits are ever at risk. A claim in
// particular must stay synchronous: a lost one would hand out its lease
// token again.

// sqlRelaxCommit lets the transaction it runs in commit without waiting for
// the WAL flush. It lasts until that transaction ends, an implicit one (a
// pipeline, see insertFast) included: set_config is SET LOCAL as a
// function.
const sqlRelaxCommit = `SELECT set_config('synchronous_commit', 'off', true)`

// keeps reports whether this store holds jobs of durability d: full and
// process, empty meaning full.
func keeps(d job.Durability) bool {
	return d == "" || d == job.DurabilityFull || d == job.DurabilityProcess
}

// durabilityOf is the stored form of d: empty is full.
func durabilityOf(d job.Durability) job.Durability {
	if d == "" {
		return job.DurabilityFull
	}
	return d
}

// allProcess reports whether there is at least one of n levels and every
// level(i) is process: a transaction that writes only such jobs may commit
// with sqlRelaxCommit.
func allProcess(n int, level func(i int) job.Durability) bool {
	for i := range n {
		if level(i) != job.DurabilityProcess {
			return false
		}
	}
	return n > 0
}
