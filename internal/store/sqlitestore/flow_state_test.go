package sqlitestore

import (
	"fmt"
	"testing"
	"time"

	"github.com/spoolq/spool/internal/job"
)

// The states of groups that only a rate log held go once the log no
// longer counts, so that groups coming and going keep memory bounded.
func TestIdleGroupStatesAreDropped(t *testing.T) {
	t.Parallel()
	r := job.Rate{Limit: 1, Period: time.Second}
	t0 := time.Date(2026, 11, 24, 12, 0, 0, 0, time.UTC)
	var f flowState
	for i := range 20000 {
		f.now = t0.Add(time.Duration(i) * 10 * time.Millisecond)
		gs := f.state(fmt.Sprint("tenant-", i), r)
		if gs == nil {
			t.Fatalf("group %d got no state with %d held", i, len(f.groups))
		}
		gs.rate = gs.rate.Add(r, f.now, 1)
	}
	// About 100 groups started within the last second; the rest are idle.
	if n := len(f.groups); n > 1300 {
		t.Fatalf("%d group states held after 20,000 groups, 100 of them in the window", n)
	}
	for g := range 100 {
		if _, ok := f.groups[fmt.Sprint("tenant-", 19999-g)]; !ok {
			t.Fatalf("group tenant-%d dropped while its start still counts", 19999-g)
		}
	}
}
