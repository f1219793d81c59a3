package queenapi

import (
	"strings"
	"testing"

	"github.com/spoolq/spool/internal/job"
)

// A message's id is the same for the same queue, partition and
// transactionId, and differs when any of them does.
func TestMessageIDsDedupByQueuePartitionAndTransaction(t *testing.T) {
	t.Parallel()
	id := messageID("orders", "cust-1", "tx-1")
	if !job.ValidName(id) {
		t.Fatalf("%q is not a valid job id", id)
	}
	if again := messageID("orders", "cust-1", "tx-1"); again != id {
		t.Fatalf("same message, ids %q and %q", id, again)
	}
	for _, other := range [][3]string{{"orders2", "cust-1", "tx-1"}, {"orders", "cust-2", "tx-1"}, {"orders", "cust-1", "tx-2"},
		{"orders", "cust-1tx", "-1"}} {
		if messageID(other[0], other[1], other[2]) == id {
			t.Errorf("%v has the id of orders/cust-1/tx-1", other)
		}
	}
}

// Every transactionId a tag can hold comes back from the job, in either
// form, and one too long for a tag is refused.
func TestTransactionIDsRoundTripThroughTags(t *testing.T) {
	t.Parallel()
	for _, tx := range []string{"3f2b6c1e-9d1a-4c55-8f0e-1b2c3d4e5f60", "order 42 / retry", "ünïcödé", strings.Repeat("x", 118)} {
		tag, ok := txTagOf(tx)
		if !ok {
			t.Fatalf("%q: no tag", tx)
		}
		if !job.ValidName(tag) {
			t.Fatalf("%q: tag %q is not a valid tag", tx, tag)
		}
		if got := txIDOf(&job.Job{ID: "x", Tags: []string{"other", tag}}); got != tx {
			t.Errorf("%q came back as %q", tx, got)
		}
	}
	if _, ok := txTagOf(strings.Repeat("é", 60)); ok {
		t.Error("a transactionId too long for a tag was taken")
	}
	// A job enqueued through Spool's own API: its id, its original's for
	// a consumer group's copy.
	if got := txIDOf(&job.Job{ID: job.CopyID("abc", "g1")}); got != "abc" {
		t.Errorf("a copy's transactionId is %q, want its original's id", got)
	}
}

func TestPartitionAndLeaseIDsRoundTrip(t *testing.T) {
	t.Parallel()
	q, p, err := parsePartitionID(partitionID("orders", "customer / 7"))
	if err != nil || q != "orders" || p != "customer / 7" {
		t.Fatalf("partition id came back as %q %q %v", q, p, err)
	}
	for _, bad := range []string{"", "!!", b64.EncodeToString([]byte("no-separator")), b64.EncodeToString([]byte("bad queue\x00p"))} {
		if _, _, err := parsePartitionID(bad); err == nil {
			t.Errorf("partition id %q was taken", bad)
		}
	}
	j := &job.Job{ID: job.CopyID("q0123", "g1"), LeaseToken: 1<<40 + 7}
	id, token, ok := parseLeaseID(leaseID(j))
	if !ok || id != j.ID || token != j.LeaseToken {
		t.Fatalf("lease id came back as %q %d %v", id, token, ok)
	}
	for _, bad := range []string{"", "!!", b64.EncodeToString([]byte("short")), b64.EncodeToString(append(make([]byte, 8), " bad"...))} {
		if _, _, ok := parseLeaseID(bad); ok {
			t.Errorf("lease id %q was taken", bad)
		}
	}
}
