package job

import "time"

// WaitRow is a pending job as a rewrite of its queue's wait deadlines
// reads it: its seq, its hand-outs so far, its run time and the deadline
// its row holds (zero: none).
type WaitRow struct {
	Seq      int64
	Attempt  int
	RunAt    time.Time
	Deadline time.Time
}

// WaitRewriteChunk is how many jobs one read of RewriteWaits takes.
const WaitRewriteChunk = 1000

// RewriteWaits gives the pending jobs of a queue whose maximum wait
// became maxWait the deadlines WaitDeadline gives them: it reads them
// with read, which returns up to n rows after seq after in seq order,
// and hands write, chunk by chunk, the rows whose stored deadline differs,
// with Deadline set to the new one. It stops at the first error, and
// when a read comes back short. The rule lives here alone: no store
// computes a deadline in SQL.
func RewriteWaits(maxWait time.Duration, read func(after int64, n int) ([]WaitRow, error), write func([]WaitRow) error) error {
	var after int64
	for {
		rows, err := read(after, WaitRewriteChunk)
		if err != nil {
			return err
		}
		changed := ChangedWaits(rows, maxWait)
		if len(changed) > 0 {
			if err := write(changed); err != nil {
				return err
			}
		}
		if len(rows) < WaitRewriteChunk {
			return nil
		}
		after = rows[len(rows)-1].Seq
	}
}

// ChangedWaits returns the rows whose stored deadline is not the one
// WaitDeadline gives them under maxWait, each with Deadline set to it.
// It reuses the memory of rows.
func ChangedWaits(rows []WaitRow, maxWait time.Duration) []WaitRow {
	out := rows[:0]
	for _, r := range rows {
		d := WaitDeadline(r.Attempt, r.RunAt, maxWait)
		if !d.Equal(r.Deadline) {
			r.Deadline = d
			out = append(out, r)
		}
	}
	return out
}
