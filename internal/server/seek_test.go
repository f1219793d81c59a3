package server

import (
	"fmt"
	"testing"
	"time"
)

// A seek over HTTP, on either store: replayed counts the copies it made
// (every job of the queue the store still holds from the start named,
// finished ones included); an ack or extend of a copy the seek dropped
// is 409 lease_lost when the seek made the copy again, 404 not_found when
// it did not; a group with nothing pending shows no oldest_pending_at and a
// lag_ms of 0.
func TestConsumerGroupSeekOverHTTP(t *testing.T) {
	t.Parallel()
	for name, store := range stores() {
		t.Run(name, func(t *testing.T) {
			change := store(t)
			t.Parallel()
			b := setup(t, change...)
			group := "/v1/queues/orders/consumer-groups/billing"
			b.must(201, "PUT", group, obj{"start": "beginning"})
			var ids []string
			for i := range 3 {
				ids = append(ids, b.enqueue(obj{"queue": "orders", "kind": "k", "payload": obj{"n": i}}))
				time.Sleep(5 * time.Millisecond) // distinct creation times
			}
			// The queue's own first job is finished: a seek replays it too.
			own := b.fetch("orders", 1, 0)
			b.must(200, "POST", "/v1/jobs/"+ids[0]+"/ack", obj{"token": token(own[0])})
			fetchGroup := func() []obj {
				return objs(b.must(200, "POST", "/v1/fetch", obj{"queues": []string{"orders"}, "consumer_group": "billing"})["jobs"])
			}
			first := fetchGroup()
			b.must(200, "POST", "/v1/jobs/"+first[0]["id"].(string)+"/ack", obj{"token": token(first[0])})
			held := fetchGroup()[0] // the second job's copy, out with a worker
			if held["id"] != ids[1]+"@billing" {
				t.Fatalf("the group's second job is %v, want the copy of %s", held["id"], ids[1])
			}

			seek := b.must(200, "POST", group+"/seek", obj{"start": "beginning"})
			if seek["replayed"] != float64(3) || seek["pending"] != float64(3) {
				t.Fatalf("seek to the beginning: %v, want 3 replayed and pending", seek)
			}
			if got := parseTime(t, seek["oldest_pending_at"]); !got.Equal(parseTime(t, b.get(ids[0])["created_at"])) || seek["lag_ms"].(float64) < 0 {
				t.Fatalf("seek to the beginning: oldest pending %v, want the first job's enqueue", seek)
			}
			for _, call := range []string{"extend", "ack"} {
				code, body := b.callAs("", "POST", "/v1/jobs/"+ids[1]+"@billing/"+call, fmt.Sprintf(`{"token":%d}`, int64(token(held))))
				wantError(t, call+" of a copy the seek made again", code, body, 409, "lease_lost", "")
			}

			from := b.get(ids[1])["created_at"]
			if seek := b.must(200, "POST", group+"/seek", obj{"start": "time", "from": from}); seek["replayed"] != float64(2) {
				t.Fatalf("seek to the second job's enqueue: %v, want 2 replayed", seek)
			}
			again := fetchGroup()[0]
			if again["id"] != ids[1]+"@billing" {
				t.Fatalf("after the seek to a time the group got %v first", again["id"])
			}

			seek = b.must(200, "POST", group+"/seek", obj{"start": "new"})
			if seek["replayed"] != float64(0) || seek["pending"] != float64(0) || seek["lag_ms"] != float64(0) {
				t.Fatalf("seek to new: %v, want nothing replayed, pending or behind", seek)
			}
			if _, ok := seek["oldest_pending_at"]; ok {
				t.Fatalf("seek to new: %v, want no oldest_pending_at", seek)
			}
			code, body := b.callAs("", "POST", "/v1/jobs/"+ids[1]+"@billing/ack", fmt.Sprintf(`{"token":%d}`, int64(token(again))))
			wantError(t, "ack of a copy the seek dropped for good", code, body, 404, "not_found", "")
			if g := b.must(200, "GET", group, nil); g["lag_ms"] != float64(0) || g["pending"] != float64(0) || g["oldest_pending_at"] != nil {
				t.Fatalf("a group with nothing pending: %v", g)
			}
		})
	}
}
