package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"time"

	"github.com/spoolq/spool/client"
)

// spoolQueue and spoolKind name the queue and the handler every Spool job uses.
const (
	spoolQueue = "bench"
	spoolKind  = "noop"
)

// spoolSystem drives a Spool server through its Go client with its
// defaults: the stream transport, each job at the queue's durability
// (full) unless a level is given.
type spoolSystem struct {
	c          *client.Client
	durability client.Durability
}

// openSpool connects to the server at url once it answers ready, since
// the server of each case has just been started.
func openSpool(ctx context.Context, url string, durability client.Durability) (*spoolSystem, error) {
	c := client.New(url)
	for {
		err := c.Ready(ctx)
		if err == nil {
			return &spoolSystem{c: c, durability: durability}, nil
		}
		select {
		case <-time.After(50 * time.Millisecond):
		case <-ctx.Done():
			return nil, fmt.Errorf("wait for the Spool server at %s: %w", url, err)
		}
	}
}

func (s *spoolSystem) params(a jobArgs) client.EnqueueParams {
	return client.EnqueueParams{Queue: spoolQueue, Kind: spoolKind, Payload: a, Durability: s.durability}
}

func (s *spoolSystem) Enqueue(ctx context.Context, a jobArgs) error {
	_, err := s.c.Enqueue(ctx, s.params(a))
	return err
}

func (s *spoolSystem) EnqueueBatch(ctx context.Context, as []jobArgs) error {
	ps := make([]client.EnqueueParams, len(as))
	for i, a := range as {
		ps[i] = s.params(a)
	}
	_, err := s.c.EnqueueBatch(ctx, ps)
	return err
}

func (s *spoolSystem) Prefill(ctx context.Context, n int) error {
	return prefillInBatches(ctx, n, s.EnqueueBatch)
}

func (s *spoolSystem) Work(ctx context.Context, concurrency int, started func(jobArgs)) (func(), error) {
	w := client.NewWorker(s.c, client.WorkerConfig{
		Queues:      []string{spoolQueue},
		Concurrency: concurrency,
		Name:        "comparebench",
		Logger:      slog.New(slog.NewTextHandler(io.Discard, nil)),
	})
	w.Handle(spoolKind, func(_ context.Context, j *client.Job) (any, error) {
		var a jobArgs
		if err := json.Unmarshal(j.Payload, &a); err != nil {
			return nil, client.NoRetry(fmt.Errorf("decode payload: %w", err))
		}
		started(a)
		return nil, nil
	})
	ran := make(chan error, 1)
	go func() { ran <- w.Run(context.WithoutCancel(ctx)) }()
	return func() {
		stopCtx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = w.Stop(stopCtx)
		<-ran
	}, nil
}

func (s *spoolSystem) Close() { s.c.CloseIdleConnections() }
