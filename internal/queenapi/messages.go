package queenapi

import (
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/spoolq/spool/internal/engine"
	"github.com/spoolq/spool/internal/httpapi/auth"
	"github.com/spoolq/spool/internal/job"
)

// Queen's defaults for a queue it creates on a first push: a lease of five
// minutes and three retries.
const (
	queenLease      = 300 * time.Second
	queenRetryLimit = 3
)

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
	if retries < 0 || retries != math.Trunc(retries) || retries >= float64(engine.MaxAttempts) {
		a.fail(w, r, job.Invalid("options.retryLimit", "must be a whole number between 0 and %d", engine.MaxAttempts-1))
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
		info, err = &job.QueueInfo{Name: name}, nil
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
	if *v < 0 || *v > float64(engine.MaxDelay/time.Second) || math.IsNaN(*v) {
		return 0, job.Invalid(field, "must be between 0 and %d seconds", int64(engine.MaxDelay/time.Second))
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

// pushResultJSON is the answer for one pushed message, in Queen's field
// names: a queued message names its partition and trace (null when it
// has none), a duplicate
// only the message already stored under its transactionId, whose id it
// answers.
type pushResultJSON struct {
	Index         int    `json:"index"`
	TransactionID string `json:"transaction_id"`
	Status        string `json:"status"`
	MessageID     string `json:"message_id"`
	PartitionID   string `json:"partition_id,omitempty"`
	TraceID       any    `json:"trace_id,omitempty"`
	QueueName     string `json:"queueName"`
}

// push enqueues messages, all or none, into their queues' partitions,
// creating the queues that do not exist as Queen's (see newQueues): every
// item is checked before anything is written, and the queues are created
// in the insert of the messages. A queue that exists keeps its
// configuration. A message whose partition already holds its
// transactionId is a duplicate: nothing is stored for it.
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
	if limit := a.engine.MaxBatch(); len(*in.Items) > limit {
		a.fail(w, r, &engine.BatchTooLargeError{Field: "items", Max: limit, Got: len(*in.Items)})
		return
	}
	reqs, err := messages(p, *in.Items, "items")
	if err != nil {
		a.fail(w, r, err)
		return
	}
	res, err := a.engine.EnqueueBatchCreating(r.Context(), reqs, newQueues(p, firstItemOf(reqs, itemOf("items"))))
	if err != nil {
		a.fail(w, r, renameItems(err, "jobs", itemOf("items")))
		return
	}
	out := make([]pushResultJSON, len(res))
	for i, e := range res {
		out[i] = pushResult(i, &reqs[i], e.Duplicate)
	}
	a.writeJSON(w, http.StatusCreated, out)
}

func pushResult(i int, req *engine.EnqueueRequest, duplicate bool) pushResultJSON {
	out := pushResultJSON{Index: i, TransactionID: txIDOfRequest(req), Status: "duplicate", MessageID: req.ID, QueueName: req.Queue}
	if duplicate {
		return out
	}
	out.Status, out.PartitionID = "queued", partitionID(req.Queue, req.Group)
	out.TraceID = json.RawMessage("null")
	if trace := traceIDOf(&job.Job{Tags: req.Tags}); trace != nil {
		out.TraceID = *trace
	}
	return out
}

// txIDOfRequest is the transactionId of a message about to be pushed.
func txIDOfRequest(req *engine.EnqueueRequest) string {
	return txIDOf(&job.Job{ID: req.ID, Tags: req.Tags})
}

// firstItemOf names the queue of the first item of reqs in each queue,
// as errors name it, item naming each item.
func firstItemOf(reqs []engine.EnqueueRequest, item func(i int) string) func(queue string) string {
	return func(name string) string {
		for i := range reqs {
			if reqs[i].Queue == name {
				return item(i) + ".queue"
			}
		}
		return ""
	}
}

// messages are the enqueues of items, checked, each item's queue in the
// caller's scope. list names the items in errors. Nothing is written.
func messages(p *auth.Principal, items []pushItem, list string) ([]engine.EnqueueRequest, error) {
	reqs := make([]engine.EnqueueRequest, len(items))
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
		reqs[i] = engine.EnqueueRequest{ID: messageID(name, partition, txID), Queue: name, Kind: MessageKind,
			Payload: payload, Group: partition, Tags: tags, PayloadValid: true}
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

// renameItems names the item of list from that err names ("jobs[3].payload")
// as item names it (item(3) + ".payload"), in the errors of the engine
// that name a field. Any other error comes back as it was.
func renameItems(err error, from string, item func(i int) string) error {
	rename := func(field string) (string, bool) {
		rest, ok := strings.CutPrefix(field, from+"[")
		if !ok {
			return field, false
		}
		digits, tail, ok := strings.Cut(rest, "]")
		i, convErr := strconv.Atoi(digits)
		if !ok || convErr != nil || i < 0 {
			return field, false
		}
		return item(i) + tail, true
	}
	var in *job.InputError
	var taken *job.IDTakenError
	var payload *engine.PayloadTooLargeError
	switch {
	case errors.As(err, &in):
		if f, ok := rename(in.Field); ok {
			return &job.InputError{Field: f, Message: in.Message}
		}
	case errors.As(err, &taken):
		if f, ok := rename(taken.Field); ok {
			return &job.IDTakenError{Field: f}
		}
	case errors.As(err, &payload):
		if f, ok := rename(payload.Field); ok {
			return &engine.PayloadTooLargeError{Field: f, Max: payload.Max, Got: payload.Got}
		}
	}
	return err
}

// itemOf names item i of list.
func itemOf(list string) func(i int) string {
	return func(i int) string { return fmt.Sprintf("%s[%d]", list, i) }
}
