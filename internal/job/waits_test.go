package job

import (
	"errors"
	"slices"
	"testing"
	"time"
)

func TestChangedWaits(t *testing.T) {
	t.Parallel()
	t0 := time.Date(2026, 11, 24, 12, 0, 0, 0, time.UTC)
	for _, c := range []struct {
		name    string
		row     WaitRow
		maxWait time.Duration
		want    time.Time // the new deadline; zero with changed false: left alone
		changed bool
	}{
		{"unstarted, no deadline yet", WaitRow{Attempt: 0, RunAt: t0}, time.Minute, t0.Add(time.Minute), true},
		{"unstarted, deadline of the old wait", WaitRow{Attempt: 0, RunAt: t0, Deadline: t0.Add(time.Hour)}, time.Minute, t0.Add(time.Minute), true},
		{"unstarted, deadline already right", WaitRow{Attempt: 0, RunAt: t0, Deadline: t0.Add(time.Minute)}, time.Minute, time.Time{}, false},
		{"wait removed", WaitRow{Attempt: 0, RunAt: t0, Deadline: t0.Add(time.Minute)}, 0, time.Time{}, true},
		{"wait removed, none stored", WaitRow{Attempt: 0, RunAt: t0}, 0, time.Time{}, false},
		{"started once", WaitRow{Attempt: 1, RunAt: t0}, time.Minute, time.Time{}, false},
		{"started, stale deadline", WaitRow{Attempt: 2, RunAt: t0, Deadline: t0}, time.Minute, time.Time{}, true},
	} {
		got := ChangedWaits([]WaitRow{c.row}, c.maxWait)
		if (len(got) == 1) != c.changed {
			t.Errorf("%s: changed %v, want %v", c.name, len(got) == 1, c.changed)
			continue
		}
		if c.changed && !got[0].Deadline.Equal(c.want) {
			t.Errorf("%s: deadline %v, want %v", c.name, got[0].Deadline, c.want)
		}
	}
}

func TestRewriteWaitsReadsInChunks(t *testing.T) {
	t.Parallel()
	t0 := time.Date(2026, 11, 24, 12, 0, 0, 0, time.UTC)
	const n = 2*WaitRewriteChunk + 7
	var reads []int64
	var written []int64
	read := func(after int64, limit int) ([]WaitRow, error) {
		reads = append(reads, after)
		var out []WaitRow
		for seq := after + 1; seq <= n && len(out) < limit; seq++ {
			r := WaitRow{Seq: seq, RunAt: t0}
			if seq%2 == 0 {
				r.Deadline = t0.Add(time.Second) // already right
			}
			out = append(out, r)
		}
		return out, nil
	}
	write := func(rows []WaitRow) error {
		for _, r := range rows {
			if !r.Deadline.Equal(t0.Add(time.Second)) {
				return errors.New("wrong deadline")
			}
			written = append(written, r.Seq)
		}
		return nil
	}
	if err := RewriteWaits(time.Second, read, write); err != nil {
		t.Fatal(err)
	}
	if want := []int64{0, WaitRewriteChunk, 2 * WaitRewriteChunk}; !slices.Equal(reads, want) {
		t.Errorf("reads after %v, want %v", reads, want)
	}
	if len(written) != (n+1)/2 || written[0] != 1 || written[len(written)-1] != n {
		t.Errorf("wrote %d rows (%v..%v), want the %d odd seqs", len(written), written[0], written[len(written)-1], (n+1)/2)
	}
	boom := errors.New("boom")
	if err := RewriteWaits(time.Second, func(int64, int) ([]WaitRow, error) { return nil, boom }, write); !errors.Is(err, boom) {
		t.Errorf("read error: %v", err)
	}
}
