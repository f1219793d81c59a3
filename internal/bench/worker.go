package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"time"

	"github.com/spoolq/spool/internal/loadgen"
)

// fetchRetry is a worker's pause after a failed fetch.
const fetchRetry = 10 * time.Millisecond

// lease is a job a worker holds: its id and fencing token.
type lease struct {
	id    string
	token int64
}

// fetchAnswer is the part of a fetch answer the worker reads.
type fetchAnswer struct {
	Jobs []struct {
		ID      string `json:"id"`
		Payload struct {
			T int64 `json:"t"`
		} `json:"payload"`
		Lease struct {
			Token int64 `json:"token"`
		} `json:"lease"`
	} `json:"jobs"`
}

// ackAnswer is the part of a batch ack answer read when an item failed.
type ackAnswer struct {
	Results []struct {
		ID    string `json:"id"`
		Error *struct {
			Code    string `json:"code"`
			Message string `json:"message"`
		} `json:"error"`
	} `json:"results"`
}

// workerCalls are one worker's requests: it long-polls POST /v1/fetch for
// its free slots and acks finished jobs in batches with POST /v1/jobs/ack,
// from buffers of its own (one set for each of the worker's two loops).
type workerCalls struct {
	r        *runner
	fetchReq []byte
	fetchOut bytes.Buffer
	ans      fetchAnswer
	ackReq   []byte
	ackOut   bytes.Buffer
}

// newWorker returns one worker of the run, shaped like the Go client's
// Worker: Concurrency jobs at once, each running for Work, fetching more
// while finished jobs wait for their batch ack. A worker that takes runs
// fetches once its run is acked, as its groups are held until then.
func newWorker(r *runner) loadgen.Worker[lease] {
	c := &workerCalls{r: r}
	return loadgen.Worker[lease]{Concurrency: r.o.Concurrency, Overlap: !r.o.Runs, Work: r.o.Work, Fetch: c.fetch, Ack: c.ack}
}

// fetch leases up to n jobs; in latency mode it records each job's time
// from its due enqueue to its start.
func (c *workerCalls) fetch(ctx context.Context, n int) ([]lease, error) {
	r := c.r
	c.fetchReq = r.bodies.appendFetch(c.fetchReq[:0], n)
	err := r.post(ctx, "/v1/fetch", c.fetchReq, &c.fetchOut, r.hFetch, time.Now())
	if err == nil {
		if err = json.Unmarshal(c.fetchOut.Bytes(), &c.ans); err != nil {
			r.countError(fmt.Sprintf("decode fetch answer: %v", err))
		}
	}
	if err != nil {
		loadgen.Sleep(ctx, fetchRetry)
		return nil, err
	}
	now := time.Now()
	jobs := make([]lease, len(c.ans.Jobs))
	for i, j := range c.ans.Jobs {
		if r.o.Mode == ModeLatency && j.Payload.T > 0 {
			r.hStart.Record(now.Sub(time.Unix(0, j.Payload.T)))
		}
		jobs[i] = lease{id: j.ID, token: j.Lease.Token}
	}
	return jobs, nil
}

// ack acks batch in one request and counts its jobs as settled. It
// returns an error only when the request failed.
func (c *workerCalls) ack(ctx context.Context, batch []lease) error {
	r := c.r
	b := append(c.ackReq[:0], `{"items":[`...)
	for i, j := range batch {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, `{"id":"`...)
		b = append(b, j.id...)
		b = append(b, `","token":`...)
		b = strconv.AppendInt(b, j.token, 10)
		b = append(b, '}')
	}
	b = append(b, `]}`...)
	c.ackReq = b
	acked := int64(len(batch))
	err := r.post(ctx, "/v1/jobs/ack", b, &c.ackOut, r.hAck, time.Now())
	if err != nil {
		if ctx.Err() != nil {
			return err
		}
		acked = 0
	} else if bytes.Contains(c.ackOut.Bytes(), []byte(`"error"`)) {
		acked -= c.itemErrors(c.ackOut.Bytes())
	}
	r.processed.Add(acked)
	r.settled.Add(int64(len(batch)))
	r.checkDone()
	return err
}

// itemErrors counts (as errors of the run) the items of a batch ack answer
// that failed, and returns how many did.
func (c *workerCalls) itemErrors(answer []byte) int64 {
	var a ackAnswer
	if err := json.Unmarshal(answer, &a); err != nil {
		c.r.countError(fmt.Sprintf("decode ack answer: %v", err))
		return 0
	}
	var n int64
	for _, res := range a.Results {
		if res.Error != nil {
			n++
			c.r.countError(fmt.Sprintf("ack %s: %s: %s", res.ID, res.Error.Code, res.Error.Message))
		}
	}
	return n
}
