package storetest

import (
	"time"

	"github.com/spoolq/spool/internal/job"
)

func deadLetterTests() []group {
	return []group{{"DeadLetters", []test{
		{"SettingsAreStoredReplacedAndCleared", testSettingsKept},
	}}}
}

// settle sets the settings of queue, which must succeed.
func (b *bundle) settle(queue string, s job.QueueSettings) {
	b.t.Helper()
	if err := b.s.QueueSetSettings(b.ctx, queue, s); err != nil {
		b.t.Fatalf("set settings of %s: %v", queue, err)
	}
}

// A queue's settings are kept with it, shown by QueueGet and QueueList,
// replaced as a whole, kept over a restart and cleared; setting them
// creates the queue.
func testSettingsKept(b *bundle) {
	s := job.QueueSettings{DeadLetterQueue: "fresh-dlq", MaxWait: 90 * time.Second}
	b.settle("fresh", s)
	if q := b.queue("fresh"); q.Settings != s {
		b.t.Fatalf("settings %+v, want %+v", q.Settings, s)
	}
	qs, err := b.s.QueueList(b.ctx)
	if err != nil || len(qs) != 1 || qs[0].Name != "fresh" || qs[0].Settings != s {
		b.t.Fatalf("queue list %+v, %v; want only fresh with its settings", qs, err)
	}
	only := job.QueueSettings{MaxWait: time.Millisecond}
	b.settle("fresh", only)
	if q := b.queue("fresh"); q.Settings != only {
		b.t.Fatalf("replaced settings %+v, want %+v", q.Settings, only)
	}
	b.settle("other", job.QueueSettings{DeadLetterQueue: "fresh"})
	if b.h.Reopen != nil {
		b.reopen()
		if q := b.queue("fresh"); q.Settings != only {
			b.t.Fatalf("settings after a restart %+v, want %+v", q.Settings, only)
		}
		if q := b.queue("other"); q.Settings.DeadLetterQueue != "fresh" {
			b.t.Fatalf("settings of other after a restart %+v", q.Settings)
		}
	}
	b.settle("fresh", job.QueueSettings{})
	if q := b.queue("fresh"); !q.Settings.IsZero() {
		b.t.Fatalf("cleared settings %+v", q.Settings)
	}
}
