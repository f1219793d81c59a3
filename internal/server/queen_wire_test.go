package server

import (
	"testing"

	"github.com/spoolq/spool/internal/config"
)

// A push answers each item as Queen does, in its field names: a queued
// message with its message, partition and trace ids, a duplicate (in the
// same push or a later one) with the id of the message already stored
// under its transactionId, on both stores.
func TestQueenPushAnswersInQueensFieldNames(t *testing.T) {
	t.Parallel()
	for name, store := range stores() {
		t.Run(name, func(t *testing.T) {
			change := store(t)
			t.Parallel()
			b := setup(t, append([]func(*config.Config){queenOn}, change...)...)
			items := []obj{
				{"queue": "wire", "partition": "p", "payload": obj{"n": 1}, "transactionId": "tx-1", "traceId": "trace-1"},
				{"queue": "wire", "partition": "p", "payload": obj{"n": 2}, "transactionId": "tx-1"},
				{"queue": "wire", "payload": obj{"n": 3}, "transactionId": "tx-2"},
			}
			first := objs(b.queenMust(201, "POST", "/api/v1/push", obj{"items": items}))
			if len(first) != 3 {
				t.Fatalf("push of 3 answered %d items: %v", len(first), first)
			}
			queued, dup, other := first[0], first[1], first[2]
			for _, r := range []obj{queued, other} {
				if r["status"] != "queued" || r["message_id"] == nil || r["message_id"] == "" || r["partition_id"] == nil || r["queueName"] != "wire" {
					t.Fatalf("queued item %v: want status, message_id, partition_id and queueName", r)
				}
			}
			if queued["index"] != 0.0 || queued["transaction_id"] != "tx-1" || queued["trace_id"] != "trace-1" {
				t.Fatalf("queued item %v: want index 0, transaction_id tx-1, trace_id trace-1", queued)
			}
			if v, ok := other["trace_id"]; !ok || v != nil {
				t.Fatalf("item pushed without a trace: %v, want trace_id null", other)
			}
			if queued["partition_id"] == other["partition_id"] {
				t.Fatalf("partitions p and Default share partition_id %v", queued["partition_id"])
			}
			if dup["status"] != "duplicate" || dup["index"] != 1.0 || dup["transaction_id"] != "tx-1" || dup["message_id"] != queued["message_id"] {
				t.Fatalf("duplicate in the same push: %v, want duplicate of message %v", dup, queued["message_id"])
			}
			for _, camel := range []string{"transactionId", "messageId", "partitionId"} {
				if _, ok := queued[camel]; ok {
					t.Fatalf("push answer %v carries %s, which Queen does not send", queued, camel)
				}
			}
			again := objs(b.queenMust(201, "POST", "/api/v1/push", obj{"items": items[:1]}))
			if again[0]["status"] != "duplicate" || again[0]["message_id"] != queued["message_id"] {
				t.Fatalf("a later push of tx-1: %v, want duplicate of message %v", again[0], queued["message_id"])
			}
		})
	}
}
