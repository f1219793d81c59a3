package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/spf13/cobra"

	"github.com/spoolq/spool/client"
)

// transactFile is the body of POST /v1/transactions, as spool jobs
// transact reads it from a file or standard input.
type transactFile struct {
	Ack []struct {
		ID     string          `json:"id"`
		Token  int64           `json:"token"`
		Result json.RawMessage `json:"result"`
	} `json:"ack"`
	Fail []struct {
		ID           string `json:"id"`
		Token        int64  `json:"token"`
		Error        string `json:"error"`
		NoRetry      bool   `json:"no_retry"`
		RetryAfterMS int64  `json:"retry_after_ms"`
	} `json:"fail"`
	Enqueue []transactJob `json:"enqueue"`
}

// transactJob is a job to enqueue, as POST /v1/jobs/batch takes it.
type transactJob struct {
	ID          string          `json:"id"`
	Queue       string          `json:"queue"`
	Kind        string          `json:"kind"`
	Payload     json.RawMessage `json:"payload"`
	Priority    int             `json:"priority"`
	RunAt       time.Time       `json:"run_at"`
	DelayMS     int64           `json:"delay_ms"`
	MaxAttempts int             `json:"max_attempts"`
	Backoff     *struct {
		Type   client.BackoffType `json:"type"`
		BaseMS *int64             `json:"base_ms"`
		MaxMS  int64              `json:"max_ms"`
		Jitter *float64           `json:"jitter"`
	} `json:"backoff"`
	LeaseMS     int64    `json:"lease_ms"`
	UniqueKey   string   `json:"unique_key"`
	UniqueForMS int64    `json:"unique_for_ms"`
	Tags        []string `json:"tags"`
	Group       string   `json:"group"`
	Durability  string   `json:"durability"`
}

// params is the job as the client takes it. A backoff is a whole policy
// there, so one given here must name its base_ms and jitter.
func (j *transactJob) params() (client.EnqueueParams, error) {
	ms := func(n int64) time.Duration { return time.Duration(n) * time.Millisecond }
	p := client.EnqueueParams{
		ID: j.ID, Queue: j.Queue, Kind: j.Kind, Priority: j.Priority, RunAt: j.RunAt, Delay: ms(j.DelayMS),
		MaxAttempts: j.MaxAttempts, Lease: ms(j.LeaseMS), UniqueKey: j.UniqueKey, UniqueFor: ms(j.UniqueForMS),
		Tags: j.Tags, Group: j.Group, Durability: client.Durability(j.Durability),
	}
	if len(j.Payload) > 0 {
		p.Payload = j.Payload
	}
	if b := j.Backoff; b != nil {
		if b.BaseMS == nil || b.Jitter == nil {
			return p, errors.New("backoff: give base_ms and jitter, or leave the backoff out for the server's")
		}
		p.Backoff = &client.Backoff{Type: b.Type, Base: ms(*b.BaseMS), Max: ms(b.MaxMS), Jitter: *b.Jitter}
	}
	return p, nil
}

// readTransaction reads a transaction from r: one JSON object, no unknown
// field.
func readTransaction(r io.Reader) (client.Transaction, error) {
	var tx client.Transaction
	data, err := io.ReadAll(r)
	if err != nil {
		return tx, err
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	var f transactFile
	if err := dec.Decode(&f); err != nil {
		return tx, fmt.Errorf("not a transaction body: %w", err)
	}
	if dec.More() {
		return tx, errors.New("not a transaction body: more than one JSON value")
	}
	for _, it := range f.Ack {
		item := client.AckItem{ID: it.ID, Token: it.Token}
		if len(it.Result) > 0 {
			item.Result = it.Result
		}
		tx.Ack = append(tx.Ack, item)
	}
	for _, it := range f.Fail {
		tx.Fail = append(tx.Fail, client.FailItem{ID: it.ID, Token: it.Token, Error: it.Error, NoRetry: it.NoRetry,
			RetryAfter: time.Duration(it.RetryAfterMS) * time.Millisecond})
	}
	for i := range f.Enqueue {
		p, err := f.Enqueue[i].params()
		if err != nil {
			return tx, fmt.Errorf("enqueue[%d].%w", i, err)
		}
		tx.Enqueue = append(tx.Enqueue, p)
	}
	return tx, nil
}

// jobsTransactCommand acks, fails and enqueues in one transaction read
// as JSON, the body of POST /v1/transactions, from a file or standard
// input.
func (c *cli) jobsTransactCommand() *cobra.Command {
	var file string
	cmd := &cobra.Command{
		Use:   "transact [--file FILE|-]",
		Short: "Ack and fail leased jobs and enqueue jobs, all or nothing",
		Long: `Ack and fail leased jobs and enqueue jobs, all or nothing. The file (or
standard input) holds the body of POST /v1/transactions:
  {"ack": [{"id": "…", "token": 7, "result": {…}}],
   "fail": [{"id": "…", "token": 9, "error": "…", "retry_after_ms": 0, "no_retry": false}],
   "enqueue": [{"queue": "…", "kind": "…", "payload": {…}}]}`,
		Example: `  spool jobs transact --file tx.json
  echo '{"ack":[{"id":"01JD3Q5W8R2M","token":7}],"enqueue":[{"kind":"next"}]}' | spool jobs transact`,
		Args: noArgs,
	}
	cmd.Flags().StringVar(&file, "file", "-", "file holding the transaction as JSON, or - for standard input")
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		in, name := c.stdin(), "standard input"
		if file != "-" {
			name = file
			f, err := os.Open(file)
			if err != nil {
				return err
			}
			defer f.Close()
			in = f
		}
		tx, err := readTransaction(in)
		if err != nil {
			return fmt.Errorf("read %s: %w", name, err)
		}
		cl, ctx, done := c.connect()
		defer done()
		res, err := cl.Transact(ctx, tx)
		if err != nil {
			return err
		}
		return c.show(res, func() {
			var rows [][]string
			for i, r := range res.Acked {
				rows = append(rows, []string{fmt.Sprintf("ack[%d]", i), r.ID, string(r.State), "", ""})
			}
			for i, r := range res.Failed {
				rows = append(rows, []string{fmt.Sprintf("fail[%d]", i), r.ID, string(r.State), shortTime(r.RunAt), ""})
			}
			for i, r := range res.Jobs {
				rows = append(rows, []string{fmt.Sprintf("enqueue[%d]", i), r.ID, string(r.State), "", yesNo(r.Duplicate)})
			}
			c.table([]string{"ITEM", "ID", "STATE", "RUN AT", "DUPLICATE"}, rows)
		})
	}
	return cmd
}
