package queenapi

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/spoolq/spool/internal/engine"
	"github.com/spoolq/spool/internal/httpapi/auth"
	"github.com/spoolq/spool/internal/job"
)

// Bounds of a pop.
const (
	// defaultTimeout is a long poll's length when the pop names none.
	defaultTimeout = 30 * time.Second
	// autopilotBatch is the batch of a pop that leaves its size to the
	// server.
	autopilotBatch = 100
)

// messageJSON is a message as a pop answers it.
type messageJSON struct {
	ID            string          `json:"id"`
	TransactionID string          `json:"transactionId"`
	TraceID       *string         `json:"traceId"`
	Data          json.RawMessage `json:"data"`
	ProducerSub   *string         `json:"producerSub"`
	CreatedAt     string          `json:"createdAt"`
	Queue         string          `json:"queue"`
	PartitionID   string          `json:"partitionId"`
	Partition     string          `json:"partition"`
	LeaseID       string          `json:"leaseId"`
	ConsumerGroup string          `json:"consumerGroup"`
	RetryCount    int             `json:"retryCount"`
}

// queenTime is Queen's form of a time: UTC, microseconds, a Z.
func queenTime(t time.Time) string { return t.UTC().Format("2006-01-02T15:04:05.000000Z") }

// messageOf is job j as a message of queue in consumer group group
// (QueueMode for none); leased says whether it carries a lease.
func messageOf(j *job.Job, queueName, group string, leased bool) messageJSON {
	partition := partitionOf(j)
	m := messageJSON{ID: originalID(j.ID), TransactionID: txIDOf(j), TraceID: traceIDOf(j), Data: j.Payload,
		CreatedAt: queenTime(j.CreatedAt), Queue: queueName, PartitionID: partitionID(queueName, partition),
		Partition: partition, ConsumerGroup: group, RetryCount: max(j.Attempt-1, 0)}
	if len(m.Data) == 0 {
		m.Data = json.RawMessage("null")
	}
	if leased {
		m.LeaseID = leaseID(j)
	}
	return m
}

// popParams are the query parameters of a pop.
type popParams struct {
	batch int
	// partitions is how many partitions a pop may take runs of (Queen's
	// v4 multi-partition pop), sharing the batch.
	partitions int
	wait       time.Duration
	group      string
	start      job.ConsumerGroupStart
	from       time.Time
	autoAck    bool
}

// parsePop reads a pop's query. Parameters Spool sizes for itself
// (autopilot's choices) or has no use for (namespace, task,
// conflation) are accepted and ignored.
func parsePop(q url.Values) (popParams, error) {
	pp := popParams{batch: 1, partitions: 1}
	autopilot := q.Get("autopilot") == "true"
	if autopilot {
		pp.batch = autopilotBatch
	}
	if s := q.Get("batch"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 || n > engine.MaxFetch {
			return pp, job.Invalid("batch", "must be a whole number between 1 and %d", engine.MaxFetch)
		}
		pp.batch = n
	}
	if s := q.Get("partitions"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 {
			return pp, job.Invalid("partitions", "must be a whole number of at least 1")
		}
		pp.partitions = min(n, engine.MaxFetch)
	}
	wait, err := boolParam(q, "wait")
	if err != nil {
		return pp, err
	}
	if wait {
		pp.wait = defaultTimeout
		if s := q.Get("timeout"); s != "" {
			ms, err := strconv.ParseInt(s, 10, 64)
			if err != nil || ms < 0 {
				return pp, job.Invalid("timeout", "must be a whole number of milliseconds")
			}
			pp.wait = min(time.Duration(ms)*time.Millisecond, engine.MaxWait)
		}
	}
	if pp.autoAck, err = boolParam(q, "autoAck"); err != nil {
		return pp, err
	}
	if g := q.Get("consumerGroup"); g != "" && g != QueueMode {
		if !job.ValidName(g) {
			return pp, job.Invalid("consumerGroup", "must be 1-%d characters of A-Za-z0-9_.:- starting with a letter or digit", job.MaxNameLength)
		}
		pp.group = g
	}
	switch from := q.Get("subscriptionFrom"); {
	case from == "now":
		pp.start = job.StartNew
	case from != "":
		t, err := parseTime(from)
		if err != nil {
			return pp, job.Invalid("subscriptionFrom", "must be now or an ISO 8601 time")
		}
		pp.start, pp.from = job.StartAt, t
	case q.Get("subscriptionMode") == "new" || q.Get("subscriptionMode") == "new-only":
		pp.start = job.StartNew
	}
	return pp, nil
}

// boolParam reads a true/false query parameter, false when absent.
func boolParam(q url.Values, name string) (bool, error) {
	switch q.Get(name) {
	case "", "false", "0":
		return false, nil
	case "true", "1":
		return true, nil
	}
	return false, job.Invalid(name, "must be true or false")
}

// parseTime reads an ISO 8601 time, UTC when it names no zone.
func parseTime(s string) (time.Time, error) {
	if t, err := time.Parse(time.RFC3339Nano, s); err == nil {
		return t.UTC(), nil
	}
	return time.ParseInLocation("2006-01-02T15:04:05.999999999", strings.TrimSuffix(s, "Z"), time.UTC)
}

type popJSON struct {
	Messages []messageJSON `json:"messages"`
}

// pop leases up to batch messages of a queue, or of one of its
// partitions, in a consumer group or in queue mode, waiting up to timeout
// with wait=true. A pop takes a queue that exists as it is and never
// changes its configuration. A group that does not exist is created,
// starting where subscriptionMode and subscriptionFrom say, when the
// caller may create groups (see createGroup, which also creates a queue
// that does not exist); a group that exists keeps its position, as
// Queen keeps a group's once it is registered. With autoAck the messages
// are acknowledged as they are handed out: at most once, nothing to ack.
// An empty pop is 204.
func (a *API) pop(w http.ResponseWriter, r *http.Request, p *auth.Principal) {
	name, partition := r.PathValue("queue"), r.PathValue("partition")
	if err := inScope(p, name, "queue"); err != nil {
		a.fail(w, r, err)
		return
	}
	pp, err := parsePop(r.URL.Query())
	if err != nil {
		a.fail(w, r, err)
		return
	}
	ctx := r.Context()
	// As Queen leases a partition to a pop (up to partitions of them), a
	// pop takes runs of its partitions: their messages in order, sharing
	// the batch.
	fetch := engine.FetchRequest{Queues: []string{name}, Max: pp.batch, Wait: pp.wait,
		Worker: "queen", ConsumerGroup: pp.group, Group: partition, Runs: true, MaxGroups: pp.partitions}
	jobs, err := a.engine.Fetch(ctx, fetch)
	var missing *engine.NotFoundError
	if pp.group != "" && errors.As(err, &missing) && missing.Field == "consumer_group" {
		group := engine.ConsumerGroupRequest{Queue: name, Name: pp.group, Start: pp.start, From: pp.from}
		if err = a.createGroup(ctx, p, group, "consumerGroup", "a pop"); err == nil {
			jobs, err = a.engine.Fetch(ctx, fetch)
		}
	}
	if err != nil {
		a.fail(w, r, err)
		return
	}
	if len(jobs) == 0 {
		w.WriteHeader(http.StatusNoContent)
		return
	}
	if pp.autoAck {
		items := make([]job.CompleteItem, len(jobs))
		for i, j := range jobs {
			items[i] = job.CompleteItem{ID: j.ID, Token: j.LeaseToken}
		}
		if _, err := a.engine.Ack(context.WithoutCancel(ctx), items); err != nil {
			a.fail(w, r, err)
			return
		}
	}
	group := pp.group
	if group == "" {
		group = QueueMode
	}
	out := popJSON{Messages: make([]messageJSON, len(jobs))}
	for i, j := range jobs {
		out.Messages[i] = messageOf(j, name, group, !pp.autoAck)
	}
	a.writeJSON(w, http.StatusOK, out)
}
