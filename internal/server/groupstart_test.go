package server

import (
	"net/http"
	"testing"
)

// The zero time of a consumer group's start, natively or through Queen's
// API, is the beginning: every job the queue holds.
func TestConsumerGroupsStartAtTheZeroTime(t *testing.T) {
	t.Parallel()
	onBothStores(t, testZeroTimeStart, queenOn)
}

func testZeroTimeStart(t *testing.T, b *bundle) {
	const zero = "0001-01-01T00:00:00Z"
	b.enqueue(obj{"queue": "log", "kind": "k"})
	b.enqueue(obj{"queue": "log", "kind": "k"})
	g := b.must(201, "PUT", "/v1/queues/log/consumer-groups/g", obj{"start": "time", "from": zero})
	if g["pending"] != 2.0 {
		t.Fatalf("a group started at the zero time: %v, want both jobs", g)
	}
	if g := b.must(200, "POST", "/v1/queues/log/consumer-groups/g/seek", obj{"start": "time", "from": zero}); g["replayed"] != 2.0 {
		t.Fatalf("a seek to the zero time: %v, want both jobs", g)
	}
	status, out := b.queenCall("", "GET", "/api/v1/pop/queue/log?consumerGroup=q1&subscriptionFrom="+zero, nil)
	if status != http.StatusOK {
		t.Fatalf("a pop subscribing from the zero time: %d %v", status, out)
	}
	b.queenMust(200, "POST", "/api/v1/consumer-groups/q1/subscription", obj{"subscriptionTimestamp": zero})
	b.queenMust(200, "POST", "/api/v1/consumer-groups/q2/queues/log/seek", obj{"timestamp": zero})
	if g := b.must(200, "GET", "/v1/queues/log/consumer-groups/q2", nil); g["pending"] != 2.0 {
		t.Fatalf("a Queen seek to the zero time: %v, want both jobs", g)
	}
}
