package queenapi

import (
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"strings"

	"github.com/spoolq/spool/internal/job"
)

// How Queen's names map onto Spool's: a Queen queue is a Spool queue of the
// same name, a partition is a Spool group (a job's group), a message is a
// job, and a consumer group is a consumer group. What Queen's clients
// carry between calls (a message's partitionId and leaseId) is encoded
// here so that an ack needs nothing but its own fields to find its job.

// DefaultPartition is the partition of a message pushed without one, and
// the partition a job without a group is shown in.
const DefaultPartition = "Default"

// QueueMode is the consumer group Queen names when a pop takes a queue's
// messages themselves, in no consumer group.
const QueueMode = "__QUEUE_MODE__"

// MessageKind is the kind of the jobs pushed through this API.
const MessageKind = "queen.message"

// Tag prefixes: a message's transactionId and traceId travel as tags of its
// job, which consumer groups' copies keep.
const (
	txTag       = "queen-tx:"
	txTag64     = "queen-tx64:"
	traceTag    = "queen-trace:"
	maxTxIDSize = 512
)

var b64 = base64.RawURLEncoding

// messageID is the id of the job of a message: the same queue, partition
// and transactionId always give the same id, which makes a push again of a
// message already there a duplicate, as Queen's dedup by partition and
// transactionId does.
func messageID(queue, partition, txID string) string {
	h := sha256.New()
	for _, s := range []string{queue, partition, txID} {
		h.Write([]byte(s))
		h.Write([]byte{0})
	}
	return "q" + hex.EncodeToString(h.Sum(nil)[:16])
}

// txTagOf is the tag that carries transactionId txID: the id itself when it
// makes a valid tag, else its base64url form. ok is false when neither
// fits a tag.
func txTagOf(txID string) (tag string, ok bool) {
	if t := txTag + txID; job.ValidName(t) {
		return t, true
	}
	t := txTag64 + b64.EncodeToString([]byte(txID))
	return t, len(t) <= job.MaxNameLength
}

// txIDOf is the transactionId of job j: the one its tags carry, or, for a
// job enqueued through Spool's own API, its id (its original's, for a
// consumer group's copy).
func txIDOf(j *job.Job) string {
	for _, t := range j.Tags {
		if id, ok := strings.CutPrefix(t, txTag); ok {
			return id
		}
		if enc, ok := strings.CutPrefix(t, txTag64); ok {
			if raw, err := b64.DecodeString(enc); err == nil {
				return string(raw)
			}
		}
	}
	return originalID(j.ID)
}

// traceIDOf is the traceId a message was pushed with, or nil.
func traceIDOf(j *job.Job) *string {
	for _, t := range j.Tags {
		if id, ok := strings.CutPrefix(t, traceTag); ok {
			return &id
		}
	}
	return nil
}

// originalID is the id of the job a consumer group's copy copies, or id
// itself for a job that is no copy.
func originalID(id string) string {
	if original, _, ok := job.SplitCopyID(id); ok {
		return original
	}
	return id
}

// partitionOf is the partition of job j: its group, and the default
// partition for a job enqueued without one through Spool's own API. A
// message pushed to the default partition has the group "Default".
func partitionOf(j *job.Job) string {
	if j.Group == "" {
		return DefaultPartition
	}
	return j.Group
}

// partitionID is the opaque id of a queue's partition that messages carry
// and acks name.
func partitionID(queue, partition string) string {
	return b64.EncodeToString([]byte(queue + "\x00" + partition))
}

// errBadPartitionID is the error of a partitionId this API did not issue.
var errBadPartitionID = errors.New("partitionId is not one this server issued")

// parsePartitionID returns the queue and partition of an id partitionID
// made.
func parsePartitionID(id string) (queue, partition string, err error) {
	raw, err := b64.DecodeString(id)
	if err != nil {
		return "", "", errBadPartitionID
	}
	queue, partition, ok := strings.Cut(string(raw), "\x00")
	if !ok || !job.ValidName(queue) || partition == "" {
		return "", "", errBadPartitionID
	}
	return queue, partition, nil
}

// leaseID is the opaque id of the lease of one delivery: the job's id and
// its lease token.
func leaseID(j *job.Job) string {
	buf := make([]byte, 8, 8+len(j.ID))
	binary.BigEndian.PutUint64(buf, uint64(j.LeaseToken))
	return b64.EncodeToString(append(buf, j.ID...))
}

// parseLeaseID returns the job id and lease token of an id leaseID made.
func parseLeaseID(id string) (jobID string, token int64, ok bool) {
	raw, err := b64.DecodeString(id)
	if err != nil || len(raw) <= 8 {
		return "", 0, false
	}
	jobID = string(raw[8:])
	if !job.ValidJobID(jobID) {
		return "", 0, false
	}
	return jobID, int64(binary.BigEndian.Uint64(raw[:8])), true
}
