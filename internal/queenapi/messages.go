package queenapi

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/spoolq/spool/internal/httpapi/auth"
	"github.com/spoolq/spool/internal/job"
	"github.com/spoolq/spool/internal/queue"
	"github.com/spoolq/spool/internal/store"
)

// Queen's defaults for a queue it creates on a first push: a lease of five
// minutes and three retries.
const (
	queenLease      = 300 * time.Second
	queenRetryLimit = 3
)

// Bounds of a pop.
const (
	// defaultTimeout is a long poll's length when the pop names none.
	defaultTimeout = 30 * time.Second
	// autopilotBatch is the batch of a pop that leaves its size to the
	// server.
	autopilotBatch = 100
)

// readyQueue makes queue ready for Queen's messages, once per node: a
// queue without flow control becomes ordered (each partition's messages
// one at a time, in order, as Queen hands them out), and a queue without
// settings gets Queen's defaults for its jobs. A queue configured before,
// through this API or Spool's own, keeps what it has.
func (a *API) readyQueue(ctx context.Context, name string) error {
	if _, ok := a.ready.Load(name); ok {
		return nil
	}
	info, err := a.engine.Queue(ctx, name)
	if errors.Is(err, job.ErrNotFound) {
		info, err = &store.QueueInfo{Name: name}, nil
	}
	if err != nil {
		return err
	}
	if info.Limits.IsZero() {
		if _, err := a.engine.SetLimits(ctx, name, job.Limits{Ordered: true}); err != nil {
			return err
		}
	}
	if info.Settings.IsZero() {
		s := job.QueueSettings{DefaultLease: queenLease, DefaultMaxAttempts: queenRetryLimit + 1}
		if _, err := a.engine.SetSettings(ctx, name, s); err != nil {
			return err
		}
	}
	a.ready.Store(name, true)
	return nil
}

// configureBody is the body of POST /api/v1/configure. Options Spool has
// no use for (priority, retention, encryption, window buffers) are
// accepted and ignored.
type configureBody struct {
	Queue     *string          `json:"queue"`
	Namespace *string          `json:"namespace"`
	Task      *string          `json:"task"`
	Options   configureOptions `json:"options"`
}

// configureOptions are the options of a queue that map onto its settings,
// in Queen's units: seconds.
type configureOptions struct {
	LeaseTime          *float64 `json:"leaseTime"`
	RetryLimit         *float64 `json:"retryLimit"`
	DelayedProcessing  *float64 `json:"delayedProcessing"`
	MaxWaitTimeSeconds *float64 `json:"maxWaitTimeSeconds"`
}

// settingsFields names the settings' fields as Queen's options.
var settingsFields = map[string]string{
	"default_lease_ms":     "options.leaseTime",
	"default_max_attempts": "options.retryLimit",
	"default_delay_ms":     "options.delayedProcessing",
	"max_wait_ms":          "options.maxWaitTimeSeconds",
}

// configure makes a queue ordered and sets its job defaults: the lease
// (leaseTime), attempts (retryLimit + 1), delay (delayedProcessing) and
// maximum wait (maxWaitTimeSeconds). Its dead-letter queue and other
// limits stay as they were.
func (a *API) configure(w http.ResponseWriter, r *http.Request, p *auth.Principal) {
	var in configureBody
	if err := a.decode(w, r, &in, false); err != nil {
		a.fail(w, r, err)
		return
	}
	if in.Queue == nil || *in.Queue == "" {
		a.fail(w, r, job.Invalid("queue", "is required"))
		return
	}
	name := *in.Queue
	if err := inScope(p, name, "queue"); err != nil {
		a.fail(w, r, err)
		return
	}
	o := in.Options
	lease, err := seconds(o.LeaseTime, queenLease, "options.leaseTime")
	if err != nil {
		a.fail(w, r, err)
		return
	}
	retries := float64(queenRetryLimit)
	if o.RetryLimit != nil {
		retries = *o.RetryLimit
	}
	if retries < 0 || retries != math.Trunc(retries) || retries >= float64(queue.MaxAttempts) {
		a.fail(w, r, job.Invalid("options.retryLimit", "must be a whole number between 0 and %d", queue.MaxAttempts-1))
		return
	}
	delay, err := seconds(o.DelayedProcessing, 0, "options.delayedProcessing")
	if err != nil {
		a.fail(w, r, err)
		return
	}
	maxWait, err := seconds(o.MaxWaitTimeSeconds, 0, "options.maxWaitTimeSeconds")
	if err != nil {
		a.fail(w, r, err)
		return
	}
	ctx := r.Context()
	info, err := a.engine.Queue(ctx, name)
	if errors.Is(err, job.ErrNotFound) {
		info, err = &store.QueueInfo{Name: name}, nil
	}
	if err != nil {
		a.fail(w, r, err)
		return
	}
	s := info.Settings
	s.DefaultLease, s.DefaultMaxAttempts, s.DefaultDelay, s.MaxWait = lease, int(retries)+1, delay, maxWait
	if err := s.Check(name); err != nil {
		a.fail(w, r, renameSettingsField(err))
		return
	}
	if !info.Limits.Ordered {
		l := info.Limits
		l.Ordered = true
		if _, err := a.engine.SetLimits(ctx, name, l); err != nil {
			a.fail(w, r, err)
			return
		}
	}
	if _, err := a.engine.SetSettings(ctx, name, s); err != nil {
		a.fail(w, r, renameSettingsField(err))
		return
	}
	a.ready.Store(name, true)
	a.writeJSON(w, http.StatusOK, map[string]any{
		"configured": true,
		"queue":      name,
		"namespace":  stringOr(in.Namespace, ""),
		"task":       stringOr(in.Task, ""),
		"options": map[string]any{
			"leaseTime":          int64(lease / time.Second),
			"retryLimit":         int(retries),
			"delayedProcessing":  int64(delay / time.Second),
			"maxWaitTimeSeconds": int64(maxWait / time.Second),
		},
	})
}

// seconds reads an option in seconds: def when it is absent, and a whole
// number of milliseconds otherwise; a negative value is refused, zero is
// unset.
func seconds(v *float64, def time.Duration, field string) (time.Duration, error) {
	if v == nil {
		return def, nil
	}
	if *v < 0 || *v > float64(queue.MaxDelay/time.Second) || math.IsNaN(*v) {
		return 0, job.Invalid(field, "must be between 0 and %d seconds", int64(queue.MaxDelay/time.Second))
	}
	return time.Duration(math.Round(*v*1000)) * time.Millisecond, nil
}

// renameSettingsField names a refused setting by its Queen option.
func renameSettingsField(err error) error {
	var in *job.InputError
	if errors.As(err, &in) {
		if f, ok := settingsFields[in.Field]; ok {
			return &job.InputError{Field: f, Message: in.Message}
		}
	}
	return err
}

func stringOr(s *string, def string) string {
	if s == nil {
		return def
	}
	return *s
}

// pushItem is one message to push.
type pushItem struct {
	Queue         *string         `json:"queue"`
	Partition     *string         `json:"partition"`
	Payload       json.RawMessage `json:"payload"`
	TransactionID *string         `json:"transactionId"`
	TraceID       *string         `json:"traceId"`
}

type pushBody struct {
	Items *[]pushItem `json:"items"`
}

// pushResultJSON is the answer for one pushed message.
type pushResultJSON struct {
	Index         int    `json:"index"`
	Status        string `json:"status"`
	TransactionID string `json:"transactionId"`
	MessageID     string `json:"messageId"`
	Queue         string `json:"queue"`
	Partition     string `json:"partition"`
	PartitionID   string `json:"partitionId"`
}

// push enqueues messages, all or none, into their queues' partitions. A
// message whose partition already holds its transactionId is a
// duplicate: nothing is stored for it.
func (a *API) push(w http.ResponseWriter, r *http.Request, p *auth.Principal) {
	var in pushBody
	if err := a.decode(w, r, &in, false); err != nil {
		a.fail(w, r, err)
		return
	}
	if in.Items == nil {
		a.fail(w, r, job.Invalid("items", "an items array is required"))
		return
	}
	if len(*in.Items) == 0 {
		a.writeJSON(w, http.StatusCreated, []pushResultJSON{})
		return
	}
	reqs, err := a.messages(r.Context(), p, *in.Items, "items")
	if err != nil {
		a.fail(w, r, err)
		return
	}
	res, err := a.engine.EnqueueBatch(r.Context(), reqs)
	if err != nil {
		a.fail(w, r, job.RenameItems(err, "jobs", "items"))
		return
	}
	out := make([]pushResultJSON, len(res))
	for i, e := range res {
		out[i] = pushResult(i, &reqs[i], e.Duplicate)
	}
	a.writeJSON(w, http.StatusCreated, out)
}

func pushResult(i int, req *queue.EnqueueRequest, duplicate bool) pushResultJSON {
	status := "queued"
	if duplicate {
		status = "duplicate"
	}
	partition := req.Group
	return pushResultJSON{Index: i, Status: status, TransactionID: txIDOfRequest(req), MessageID: req.ID,
		Queue: req.Queue, Partition: partition, PartitionID: partitionID(req.Queue, partition)}
}

// txIDOfRequest is the transactionId of a message about to be pushed.
func txIDOfRequest(req *queue.EnqueueRequest) string {
	return txIDOf(&job.Job{ID: req.ID, Tags: req.Tags})
}

// messages are the enqueues of items, checked, each item's queue in the
// caller's scope and made ready. list names the items in errors.
func (a *API) messages(ctx context.Context, p *auth.Principal, items []pushItem, list string) ([]queue.EnqueueRequest, error) {
	reqs := make([]queue.EnqueueRequest, len(items))
	for i, it := range items {
		field := func(name string) string { return fmt.Sprintf("%s[%d].%s", list, i, name) }
		if it.Queue == nil || *it.Queue == "" {
			return nil, job.Invalid(field("queue"), "is required")
		}
		name := *it.Queue
		if !job.ValidName(name) {
			return nil, job.Invalid(field("queue"), "must be 1-%d characters of A-Za-z0-9_.:- starting with a letter or digit", job.MaxNameLength)
		}
		if err := inScope(p, name, field("queue")); err != nil {
			return nil, err
		}
		partition := DefaultPartition
		if it.Partition != nil && *it.Partition != "" {
			partition = *it.Partition
		}
		txID := newUUID()
		if it.TransactionID != nil && *it.TransactionID != "" {
			txID = *it.TransactionID
		}
		if len(txID) > maxTxIDSize {
			return nil, job.Invalid(field("transactionId"), "must be at most %d bytes", maxTxIDSize)
		}
		tag, ok := txTagOf(txID)
		if !ok {
			return nil, job.Invalid(field("transactionId"), "is too long: at most %d characters of A-Za-z0-9_.:-, or %d bytes of others",
				job.MaxNameLength-len(txTag), (job.MaxNameLength-len(txTag64))*3/4)
		}
		tags := []string{tag}
		if it.TraceID != nil && *it.TraceID != "" {
			if t := traceTag + *it.TraceID; job.ValidName(t) {
				tags = append(tags, t)
			}
		}
		payload := it.Payload
		if len(payload) == 0 {
			payload = json.RawMessage("null")
		}
		reqs[i] = queue.EnqueueRequest{ID: messageID(name, partition, txID), Queue: name, Kind: MessageKind,
			Payload: payload, Group: partition, Tags: tags, PayloadValid: true}
		if err := a.readyQueue(ctx, name); err != nil {
			return nil, err
		}
	}
	return reqs, nil
}

// newUUID returns a random UUID (version 4), the transactionId of a
// message pushed without one.
func newUUID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:16])
}

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
	batch   int
	wait    time.Duration
	group   string
	start   store.GroupStart
	from    time.Time
	autoAck bool
}

// parsePop reads a pop's query. Parameters Spool sizes for itself
// (partitions, autopilot's choices) or has no use for (namespace, task,
// conflation) are accepted and ignored.
func parsePop(q url.Values) (popParams, error) {
	pp := popParams{batch: 1}
	autopilot := q.Get("autopilot") == "true"
	if autopilot {
		pp.batch = autopilotBatch
	}
	if s := q.Get("batch"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 || n > queue.MaxFetch {
			return pp, job.Invalid("batch", "must be a whole number between 1 and %d", queue.MaxFetch)
		}
		pp.batch = n
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
			pp.wait = min(time.Duration(ms)*time.Millisecond, queue.MaxWait)
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
		pp.start = store.StartNew
	case from != "":
		t, err := parseTime(from)
		if err != nil {
			return pp, job.Invalid("subscriptionFrom", "must be now or an ISO 8601 time")
		}
		pp.start, pp.from = store.StartAt, t
	case q.Get("subscriptionMode") == "new" || q.Get("subscriptionMode") == "new-only":
		pp.start = store.StartNew
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
// with wait=true. The group is created on its first pop, starting where
// subscriptionMode and subscriptionFrom say. With autoAck the messages are
// acknowledged as they are handed out: at most once, nothing to ack. An
// empty pop is 204.
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
	if pp.group != "" {
		if err := a.ensureGroup(ctx, name, pp); err != nil {
			a.fail(w, r, err)
			return
		}
	}
	jobs, err := a.engine.Fetch(ctx, queue.FetchRequest{Queues: []string{name}, Max: pp.batch, Wait: pp.wait,
		Worker: "queen", ConsumerGroup: pp.group, Group: partition})
	if err != nil {
		a.fail(w, r, err)
		return
	}
	if len(jobs) == 0 {
		w.WriteHeader(http.StatusNoContent)
		return
	}
	if pp.autoAck {
		items := make([]store.JobCompleteItem, len(jobs))
		for i, j := range jobs {
			items[i] = store.JobCompleteItem{ID: j.ID, Token: j.LeaseToken}
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

// ensureGroup creates consumer group pp.group of queue name where pp
// starts it, unless this node has seen it exist. A group that exists is
// left where it is, as Queen keeps a group's position once it is
// registered.
func (a *API) ensureGroup(ctx context.Context, name string, pp popParams) error {
	lane := job.LaneName(name, pp.group)
	if _, ok := a.groups.Load(lane); ok {
		return nil
	}
	if err := a.readyQueue(ctx, name); err != nil {
		return err
	}
	_, _, err := a.engine.CreateConsumerGroup(ctx, queue.ConsumerGroupRequest{Queue: name, Name: pp.group, Start: pp.start, From: pp.from})
	if err != nil {
		return err
	}
	a.groups.Store(lane, true)
	return nil
}
