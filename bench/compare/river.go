package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/riverqueue/river/rivermigrate"
)

// riverArgs is jobArgs as a River job.
type riverArgs struct{ jobArgs }

func (riverArgs) Kind() string { return "noop" }

// riverPoolSize is the pgx pool's size: room for the 50 producers of the
// 50-producer case and the worker's own connections (pgxpool's default is
// 4 on two CPUs).
const riverPoolSize = 64

// riverSystem drives River through its client: Insert, InsertManyFast
// (COPY) for bulk, and the client's workers with River's defaults but for
// MaxWorkers and, for the variant, FetchCooldown.
type riverSystem struct {
	pool          *pgxpool.Pool
	inserter      *river.Client[pgx.Tx]
	fetchCooldown time.Duration
}

// openRiver connects to an empty database and runs River's migrations.
func openRiver(ctx context.Context, url string, fetchCooldown time.Duration) (*riverSystem, error) {
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		return nil, fmt.Errorf("-pg: %w", err)
	}
	cfg.MaxConns = riverPoolSize
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("connect to PostgreSQL: %w", err)
	}
	migrator, err := rivermigrate.New(riverpgxv5.New(pool), nil)
	if err == nil {
		_, err = migrator.Migrate(ctx, rivermigrate.DirectionUp, nil)
	}
	if err != nil {
		pool.Close()
		return nil, fmt.Errorf("migrate River's schema: %w", err)
	}
	inserter, err := river.NewClient(riverpgxv5.New(pool), &river.Config{Logger: quietLogger()})
	if err != nil {
		pool.Close()
		return nil, fmt.Errorf("create River client: %w", err)
	}
	return &riverSystem{pool: pool, inserter: inserter, fetchCooldown: fetchCooldown}, nil
}

func quietLogger() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

func (s *riverSystem) Enqueue(ctx context.Context, a jobArgs) error {
	_, err := s.inserter.Insert(ctx, riverArgs{a}, nil)
	return err
}

func (s *riverSystem) EnqueueBatch(ctx context.Context, as []jobArgs) error {
	ps := make([]river.InsertManyParams, len(as))
	for i, a := range as {
		ps[i] = river.InsertManyParams{Args: riverArgs{a}}
	}
	_, err := s.inserter.InsertManyFast(ctx, ps)
	return err
}

func (s *riverSystem) Prefill(ctx context.Context, n int) error {
	return prefillInBatches(ctx, n, s.EnqueueBatch)
}

func (s *riverSystem) Work(ctx context.Context, concurrency int, started func(jobArgs)) (func(), error) {
	workers := river.NewWorkers()
	river.AddWorker(workers, river.WorkFunc(func(_ context.Context, j *river.Job[riverArgs]) error {
		started(j.Args.jobArgs)
		return nil
	}))
	c, err := river.NewClient(riverpgxv5.New(s.pool), &river.Config{
		Logger:        quietLogger(),
		Workers:       workers,
		Queues:        map[string]river.QueueConfig{river.QueueDefault: {MaxWorkers: concurrency}},
		FetchCooldown: s.fetchCooldown,
	})
	if err != nil {
		return nil, fmt.Errorf("create River client: %w", err)
	}
	if err := c.Start(context.WithoutCancel(ctx)); err != nil {
		return nil, fmt.Errorf("start River client: %w", err)
	}
	return func() {
		stopCtx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = c.Stop(stopCtx)
	}, nil
}

func (s *riverSystem) Close() { s.pool.Close() }
