package queenapi

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strconv"
	"time"

	"github.com/spoolq/spool/internal/engine"
	"github.com/spoolq/spool/internal/httpapi/auth"
	"github.com/spoolq/spool/internal/job"
)

// Bounds of a dead-letter listing.
const (
	defaultDLQLimit = 100
	maxDLQLimit     = 1000
	maxDLQOffset    = 10_000
)

// deadLetterJSON is a message that died, as the dead-letter listing
// answers it.
type deadLetterJSON struct {
	ID            string  `json:"id"`
	TransactionID string  `json:"transactionId"`
	PartitionID   string  `json:"partitionId"`
	Queue         string  `json:"queue"`
	Partition     string  `json:"partition"`
	ConsumerGroup string  `json:"consumerGroup"`
	ErrorMessage  string  `json:"errorMessage"`
	RetryCount    int     `json:"retryCount"`
	Data          any     `json:"data"`
	ProducerSub   *string `json:"producerSub"`
	CreatedAt     string  `json:"createdAt"`
	FailedAt      string  `json:"failedAt"`
}

type deadLettersJSON struct {
	Messages   []deadLetterJSON `json:"messages"`
	Total      int64            `json:"total"`
	Pagination struct {
		Limit  int `json:"limit"`
		Offset int `json:"offset"`
	} `json:"pagination"`
}

// deadLetters lists the messages of a queue that died in one consumer
// group (consumerGroup) or in queue mode, in the order they were pushed,
// limit of them from offset.
func (a *API) deadLetters(w http.ResponseWriter, r *http.Request, p *auth.Principal) {
	q := r.URL.Query()
	name := q.Get("queue")
	if name == "" {
		a.fail(w, r, job.Invalid("queue", "is required"))
		return
	}
	if err := inScope(p, name, "queue"); err != nil {
		a.fail(w, r, err)
		return
	}
	limit, err := intParam(q.Get("limit"), defaultDLQLimit, 1, maxDLQLimit, "limit")
	if err != nil {
		a.fail(w, r, err)
		return
	}
	offset, err := intParam(q.Get("offset"), 0, 0, maxDLQOffset, "offset")
	if err != nil {
		a.fail(w, r, err)
		return
	}
	group := q.Get("consumerGroup")
	lane := name
	if group != "" && group != QueueMode {
		if !job.ValidName(group) {
			a.fail(w, r, job.Invalid("consumerGroup", "must be 1-%d characters of A-Za-z0-9_.:- starting with a letter or digit", job.MaxNameLength))
			return
		}
		lane = job.LaneName(name, group)
	} else {
		group = QueueMode
	}
	ctx := r.Context()
	var dead []*job.Job
	cursor := ""
	for len(dead) < offset+limit {
		page, err := a.engine.List(ctx, job.ListParams{Queue: lane, State: job.StateDead, Cursor: cursor, Limit: maxDLQLimit})
		if err != nil {
			a.fail(w, r, err)
			return
		}
		dead = append(dead, page.Jobs...)
		if page.Next == "" {
			break
		}
		cursor = page.Next
	}
	out := deadLettersJSON{Messages: []deadLetterJSON{}, Total: a.deadCount(ctx, name, group, len(dead))}
	out.Pagination.Limit, out.Pagination.Offset = limit, offset
	for i := offset; i < len(dead) && i < offset+limit; i++ {
		j := dead[i]
		m := messageOf(j, name, group, false)
		d := deadLetterJSON{ID: m.ID, TransactionID: m.TransactionID, PartitionID: m.PartitionID, Queue: name,
			Partition: m.Partition, ConsumerGroup: group, RetryCount: m.RetryCount, Data: m.Data,
			CreatedAt: m.CreatedAt, FailedAt: queenTime(j.FinishedAt)}
		if n := len(j.Errors); n > 0 {
			d.ErrorMessage = j.Errors[n-1].Message
		}
		out.Messages = append(out.Messages, d)
	}
	a.writeJSON(w, http.StatusOK, out)
}

// deadCount is how many dead jobs a queue, or one of its consumer
// groups, holds; listed when the count cannot be read.
func (a *API) deadCount(ctx context.Context, name, group string, listed int) int64 {
	if group == QueueMode {
		if info, err := a.engine.Queue(ctx, name); err == nil {
			return info.Counts[job.StateDead]
		}
	} else if g, err := a.engine.ConsumerGroup(ctx, name, group); err == nil {
		return g.Counts[job.StateDead]
	}
	return int64(listed)
}

// intParam reads a whole-number query parameter between lo and hi, def
// when absent.
func intParam(s string, def, lo, hi int, name string) (int, error) {
	if s == "" {
		return def, nil
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < lo || n > hi {
		return 0, job.Invalid(name, "must be a whole number between %d and %d", lo, hi)
	}
	return n, nil
}

// groupJSON is one consumer group of one queue.
type groupJSON struct {
	Name                  string   `json:"name"`
	Topics                []string `json:"topics"`
	QueueName             string   `json:"queueName"`
	Members               int      `json:"members"`
	PartitionsWithLag     int      `json:"partitionsWithLag"`
	TotalLag              int64    `json:"totalLag"`
	MaxTimeLag            int64    `json:"maxTimeLag"`
	State                 string   `json:"state"`
	SubscriptionMode      string   `json:"subscriptionMode"`
	SubscriptionCreatedAt string   `json:"subscriptionCreatedAt"`
}

// pending is how many jobs of counts are not finished.
func pending(counts map[job.State]int64) int64 {
	return counts[job.StateScheduled] + counts[job.StateAvailable] + counts[job.StateActive] + counts[job.StateRetrying]
}

// eachGroup calls f with every consumer group of every queue in the
// caller's namespaces (named, when name is not empty).
func (a *API) eachGroup(ctx context.Context, p *auth.Principal, name string, f func(g *job.ConsumerGroup) error) error {
	queues, err := a.engine.Queues(ctx)
	if err != nil {
		return err
	}
	for _, q := range queues {
		if inScope(p, q.Name, "") != nil {
			continue
		}
		groups, err := a.engine.ConsumerGroups(ctx, q.Name)
		if err != nil {
			return err
		}
		for i := range groups {
			if name == "" || groups[i].Name == name {
				if err := f(&groups[i]); err != nil {
					return err
				}
			}
		}
	}
	return nil
}

// listGroups lists every consumer group of every queue in the caller's
// namespaces, with its lag: the jobs it has not finished (totalLag) and
// the age in seconds of the oldest of them (maxTimeLag). It reads the
// groups a page at a time (one store read a page, whatever the number of
// queues) and writes each page as it goes, so that its memory stays
// bounded however many groups there are; a read that fails after the
// first page ends the answer unfinished, which no client can take for a
// whole list.
func (a *API) listGroups(w http.ResponseWriter, r *http.Request, p *auth.Principal) {
	ctx := r.Context()
	now := a.engine.Now()
	var page job.ConsumerGroupListParams
	gs, err := a.engine.ConsumerGroupsPage(ctx, page)
	if err != nil {
		a.fail(w, r, err)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusOK)
	out := bufio.NewWriter(w)
	enc := json.NewEncoder(out)
	sep := byte('[')
	for {
		for i := range gs {
			g := &gs[i]
			if inScope(p, g.Queue, "") != nil {
				continue
			}
			row := groupJSON{Name: g.Name, Topics: []string{g.Queue}, QueueName: g.Queue, TotalLag: pending(g.Counts),
				State: "Stable", SubscriptionMode: "all", SubscriptionCreatedAt: queenTime(g.CreatedAt)}
			if !g.OldestPending.IsZero() {
				row.MaxTimeLag = int64(now.Sub(g.OldestPending) / time.Second)
				row.State = "Lagging"
			}
			_ = out.WriteByte(sep)
			sep = ','
			if err := enc.Encode(row); err != nil {
				return // the client went away
			}
		}
		if len(gs) < page.PageSize() {
			break
		}
		page.AfterQueue, page.AfterName = gs[len(gs)-1].Queue, gs[len(gs)-1].Name
		if gs, err = a.engine.ConsumerGroupsPage(ctx, page); err != nil {
			if ctx.Err() == nil {
				a.opts.Logger.Error("queen: list consumer groups", "err", err)
			}
			panic(http.ErrAbortHandler)
		}
	}
	if sep == '[' {
		_ = out.WriteByte(sep)
	}
	_ = out.WriteByte(']')
	_ = out.Flush()
}

// deleteGroup deletes a consumer group from every queue that has it.
func (a *API) deleteGroup(w http.ResponseWriter, r *http.Request, p *auth.Principal) {
	name := r.PathValue("group")
	n := 0
	err := a.eachGroup(r.Context(), p, name, func(g *job.ConsumerGroup) error {
		n++
		return a.dropGroup(r.Context(), g.Queue, name)
	})
	if err != nil {
		a.fail(w, r, err)
		return
	}
	a.writeJSON(w, http.StatusOK, map[string]any{"success": true, "consumerGroup": name, "deletedPartitions": n,
		"metadataDeleted": r.URL.Query().Get("deleteMetadata") != "false"})
}

// dropGroup deletes consumer group name of queue q.
func (a *API) dropGroup(ctx context.Context, q, name string) error {
	return a.engine.DeleteConsumerGroup(ctx, q, name)
}

// deleteQueueGroup deletes a consumer group of one queue.
func (a *API) deleteQueueGroup(w http.ResponseWriter, r *http.Request, p *auth.Principal) {
	name, q := r.PathValue("group"), r.PathValue("queue")
	if err := inScope(p, q, "queue"); err != nil {
		a.fail(w, r, err)
		return
	}
	if err := a.dropGroup(r.Context(), q, name); err != nil {
		a.fail(w, r, err)
		return
	}
	a.writeJSON(w, http.StatusOK, map[string]any{"success": true, "consumerGroup": name, "queueName": q,
		"deletedPartitions": 1, "metadataDeleted": r.URL.Query().Get("deleteMetadata") != "false"})
}

type subscriptionBody struct {
	SubscriptionTimestamp *string `json:"subscriptionTimestamp"`
}

// moveSubscription moves a consumer group, on every queue that has it, to
// the messages pushed at or after a time.
func (a *API) moveSubscription(w http.ResponseWriter, r *http.Request, p *auth.Principal) {
	var in subscriptionBody
	if err := a.decode(w, r, &in, false); err != nil {
		a.fail(w, r, err)
		return
	}
	if in.SubscriptionTimestamp == nil {
		a.fail(w, r, job.Invalid("subscriptionTimestamp", "is required"))
		return
	}
	at, err := parseTime(*in.SubscriptionTimestamp)
	if err != nil {
		a.fail(w, r, job.Invalid("subscriptionTimestamp", "must be an ISO 8601 time"))
		return
	}
	name := r.PathValue("group")
	n := 0
	err = a.eachGroup(r.Context(), p, name, func(g *job.ConsumerGroup) error {
		n++
		_, _, err := a.engine.SeekConsumerGroup(r.Context(), engine.ConsumerGroupRequest{Queue: g.Queue, Name: name, Start: job.StartAt, From: at})
		return err
	})
	if err != nil {
		a.fail(w, r, err)
		return
	}
	a.writeJSON(w, http.StatusOK, map[string]any{"success": true, "consumerGroup": name,
		"newTimestamp": *in.SubscriptionTimestamp, "rowsUpdated": n})
}

type seekBody struct {
	ToEnd     bool    `json:"toEnd"`
	Timestamp *string `json:"timestamp"`
}

// seek moves a consumer group of a queue to the end (new messages only)
// or to the messages pushed at or after a time; a group that does not
// exist yet is created there (see createGroup).
func (a *API) seek(w http.ResponseWriter, r *http.Request, p *auth.Principal) {
	name, q := r.PathValue("group"), r.PathValue("queue")
	if err := inScope(p, q, "queue"); err != nil {
		a.fail(w, r, err)
		return
	}
	var in seekBody
	if err := a.decode(w, r, &in, false); err != nil {
		a.fail(w, r, err)
		return
	}
	req := engine.ConsumerGroupRequest{Queue: q, Name: name, Start: job.StartNew}
	var target any
	switch {
	case in.ToEnd:
	case in.Timestamp != nil && *in.Timestamp != "":
		at, err := parseTime(*in.Timestamp)
		if err != nil {
			a.fail(w, r, job.Invalid("timestamp", "must be an ISO 8601 time"))
			return
		}
		req.Start, req.From, target = job.StartAt, at, queenTime(at)
	default:
		a.fail(w, r, job.Invalid("", "must specify either 'toEnd': true or 'timestamp'"))
		return
	}
	ctx := r.Context()
	_, moved, err := a.engine.SeekConsumerGroup(ctx, req)
	if errors.Is(err, job.ErrNotFound) {
		err = a.createGroup(ctx, p, req, "", "a seek")
	}
	if err != nil {
		a.fail(w, r, err)
		return
	}
	a.writeJSON(w, http.StatusOK, map[string]any{"success": true, "consumerGroup": name, "queueName": q,
		"seekToEnd": in.ToEnd, "targetTimestamp": target, "partitionsUpdated": moved})
}
