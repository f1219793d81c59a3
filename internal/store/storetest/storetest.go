// Package storetest is the conformance suite of the storage contract: the
// tests and benchmarks that every store.Store backend must pass, whatever
// database it runs on. A backend's own tests call Run and Bench with a
// Harness that opens fresh stores; a backend is done when Run passes.
//
// The suite holds a store to the doc comments of package store and package
// job, and nothing else: it reads state only through the Store interface,
// passes every time explicitly (a fixed base time plus offsets, whole
// milliseconds so that stores keeping microseconds compare equal), and
// never sleeps. It asks one thing of a store that the contract implies
// rather than states: a job whose State is neither scheduled nor available
// is refused, which is how the suite makes a batch fail to check that
// JobInsertMany is all or none.
package storetest

import (
	"testing"

	"github.com/spoolq/spool/internal/job"
	"github.com/spoolq/spool/internal/store"
)

// Harness gives the suite fresh stores of the backend under test.
type Harness struct {
	// Open returns a new store on fresh, empty storage. It registers with
	// tb.Cleanup whatever closes the store and removes its data; the suite
	// may close the store first, since Close is idempotent.
	Open func(tb testing.TB) store.Store
	// Reopen closes s and returns a new store on the same data, as a
	// restart of the server would, registering the new store's release
	// with tb.Cleanup. Nil leaves out the restart checks.
	Reopen func(tb testing.TB, s store.Store) store.Store
	// Node opens another store on the data of s, as another server
	// sharing s's database would, registering its release with
	// tb.Cleanup. Nil for a store that one process alone opens; where it
	// is set, the checks of concurrent changes spread their calls over
	// both nodes.
	Node func(tb testing.TB, s store.Store) store.Store
	// Capabilities is what the store must report.
	Capabilities store.Capabilities
	// Durabilities are the levels of the jobs the store keeps; the suite
	// inserts jobs of each and expects any other to be refused. Nil means
	// full and process, an on-disk store's.
	Durabilities []job.Durability
}

// durabilities is h.Durabilities with its default applied.
func (h Harness) durabilities() []job.Durability {
	if h.Durabilities == nil {
		return []job.Durability{job.DurabilityFull, job.DurabilityProcess}
	}
	return h.Durabilities
}

// test is one behaviour of the contract, checked on a fresh store.
type test struct {
	name string
	fn   func(b *bundle)
}

// group gathers the tests of one store method.
type group struct {
	name  string
	tests []test
}

// Run checks the store that h opens against the whole storage contract:
// one parallel subtest per behaviour, each on its own fresh store, grouped
// by store method; then concurrent claims, acks, inserts and rescues; then
// seeded runs of random operations compared step by step with a reference
// model of the contract (the seed is in the subtest's name). After each
// subtest that leaves its store open, the suite checks that the queue
// counts agree with the jobs the store lists and that every job's lease
// and finish times fit its state.
func Run(t *testing.T, h Harness) {
	if h.Open == nil {
		t.Fatal("storetest: Harness.Open is nil")
	}
	groups := [][]group{insertTests(), claimTests(), leaseTests(), transactTests(), adminTests(), queueTests(),
		maintenanceTests(), lifecycleTests(h), concurrencyTests(), modelTests(), durabilityTests(), scheduleTests(), flowTests(),
		orderedTests(), orderedRunTests(), groupClaimTests(), turnTests(), deadLetterFlowTests(), deadLetterTests(), errorHistoryTests(), laneTests(), workerTests(), observeTests(), createTests(), sessionTests(), patchTests()}
	for _, gs := range groups {
		for _, g := range gs {
			t.Run(g.name, func(t *testing.T) {
				t.Parallel()
				for _, tc := range g.tests {
					t.Run(tc.name, func(t *testing.T) {
						t.Parallel()
						tc.fn(setup(t, h))
					})
				}
			})
		}
	}
}
