package storetest

import (
	"slices"
	"time"

	"github.com/spoolq/spool/internal/job"
)

func deadLetterFlowTests() []group {
	return []group{{"DeadLettersWithFlowControl", []test{
		{"ACopyWithAGroupIsHandedOutAtOnce", testLetterGroupedCopy},
	}}}
}

// A dead-letter copy with a group gives its dead-letter queue flow
// control, as an insert of a job with a group does: a claim right after
// hands out the copy and the queue's other jobs, though the store found
// the queue without flow control just before.
func testLetterGroupedCopy(b *bundle) {
	if js := b.claimAt(t0, 5, "dlq"); len(js) != 0 {
		b.t.Fatalf("claim of an empty queue: %v", idsOf(js))
	}
	b.settle("src", job.QueueSettings{DeadLetterQueue: "dlq", MaxWait: time.Second})
	b.add(newJob("src", inGroup("g")))
	if res := b.sweep(at(2*time.Second), 10); res.Count != 1 || !slices.Equal(res.Available, []string{"dlq"}) {
		b.t.Fatalf("sweep: %+v, want one job killed into dlq", res)
	}
	plain := b.add(newJob("dlq"))[0]
	js := b.claimAt(at(3*time.Second), 5, "dlq")
	if len(js) != 2 || !slices.Contains(idsOf(js), plain) || !slices.Contains(groupsOf(js), "g") {
		b.t.Fatalf("claim of dlq: %v of groups %q, want the copy of group g and %s", idsOf(js), groupsOf(js), plain)
	}
}
