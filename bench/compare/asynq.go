package main

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/hibiken/asynq"
)

// asynqKind is the task type every asynq job uses.
const asynqKind = "noop"

// asynqSystem drives asynq through its client and server with their
// defaults, but for a connection pool as large as the producers of the
// 50-producer case (asynq's default is 10 per CPU).
type asynqSystem struct {
	opt    asynq.RedisClientOpt
	client *asynq.Client
}

func openAsynq(addr string) *asynqSystem {
	opt := asynq.RedisClientOpt{Addr: addr, PoolSize: 64}
	return &asynqSystem{opt: opt, client: asynq.NewClient(opt)}
}

func (s *asynqSystem) Enqueue(ctx context.Context, a jobArgs) error {
	body, err := json.Marshal(a)
	if err != nil {
		return err
	}
	_, err = s.client.EnqueueContext(ctx, asynq.NewTask(asynqKind, body))
	return err
}

// EnqueueBatch is unsupported: asynq's client enqueues one task a call.
func (s *asynqSystem) EnqueueBatch(context.Context, []jobArgs) error { return errUnsupported }

// Prefill enqueues from 50 producers, asynq having no bulk call.
func (s *asynqSystem) Prefill(ctx context.Context, n int) error {
	var next atomic.Int64
	var wg sync.WaitGroup
	var firstErr error
	var once sync.Once
	for range 50 {
		wg.Go(func() {
			for seq := next.Add(1); seq <= int64(n); seq = next.Add(1) {
				if err := s.Enqueue(ctx, newArgs(seq)); err != nil {
					once.Do(func() { firstErr = err })
					return
				}
			}
		})
	}
	wg.Wait()
	return firstErr
}

func (s *asynqSystem) Work(_ context.Context, concurrency int, started func(jobArgs)) (func(), error) {
	srv := asynq.NewServer(s.opt, asynq.Config{Concurrency: concurrency, LogLevel: asynq.ErrorLevel})
	mux := asynq.NewServeMux()
	mux.HandleFunc(asynqKind, func(_ context.Context, t *asynq.Task) error {
		var a jobArgs
		if err := json.Unmarshal(t.Payload(), &a); err != nil {
			return fmt.Errorf("decode payload: %w: %w", err, asynq.SkipRetry)
		}
		started(a)
		return nil
	})
	if err := srv.Start(mux); err != nil {
		return nil, err
	}
	return srv.Shutdown, nil
}

func (s *asynqSystem) Close() { _ = s.client.Close() }
