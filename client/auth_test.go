package client_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/spoolq/spool/client"
	"github.com/spoolq/spool/internal/config"
	"github.com/spoolq/spool/internal/server"
)

// A client with WithToken works against a server with auth on; one without
// a token, or with a token of the wrong role or namespace, is refused with
// the matching sentinel.
func TestClientWithToken(t *testing.T) {
	t.Parallel()
	const (
		producer = "producer-secret-0123456789"
		worker   = "worker-secret-0123456789ab"
	)
	cfg := config.Default()
	cfg.Addr = "127.0.0.1:0"
	cfg.Data = t.TempDir()
	cfg.Auth = true
	cfg.AuthTokens = "p producer mail. " + producer + "; w worker * " + worker
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	srv := server.New(cfg, quietLogger())
	if err := srv.Start(context.Background()); err != nil {
		t.Fatalf("start server: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = srv.Stop(ctx)
	})
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	base := "http://" + srv.Addr()
	anon := client.New(base)
	prod := client.New(base, client.WithToken(producer))
	work := client.New(base, client.WithToken(worker))
	for _, c := range []*client.Client{anon, prod, work} {
		t.Cleanup(c.CloseIdleConnections)
	}

	if err := anon.Health(ctx); err != nil {
		t.Fatalf("health without a token: %v", err)
	}
	if _, err := anon.Enqueue(ctx, client.EnqueueParams{Queue: "mail.out", Kind: "k"}); !errors.Is(err, client.ErrUnauthorized) {
		t.Fatalf("enqueue without a token: %v, want ErrUnauthorized", err)
	}
	if _, err := prod.Enqueue(ctx, client.EnqueueParams{Queue: "billing", Kind: "k"}); !errors.Is(err, client.ErrForbidden) {
		t.Fatalf("enqueue outside the namespace: %v, want ErrForbidden", err)
	}
	res, err := prod.Enqueue(ctx, client.EnqueueParams{Queue: "mail.out", Kind: "k"})
	if err != nil {
		t.Fatalf("enqueue with a producer token: %v", err)
	}
	if _, err := prod.Fetch(ctx, client.FetchParams{Queues: []string{"mail.out"}}); !errors.Is(err, client.ErrForbidden) {
		t.Fatalf("fetch with a producer token: %v, want ErrForbidden", err)
	}
	jobs, err := work.Fetch(ctx, client.FetchParams{Queues: []string{"mail.out"}})
	if err != nil || len(jobs) != 1 || jobs[0].ID != res.ID {
		t.Fatalf("fetch with a worker token: %v %v", jobs, err)
	}
	if _, err := work.Ack(ctx, jobs[0].ID, jobs[0].Lease.Token, nil); err != nil {
		t.Fatalf("ack with a worker token: %v", err)
	}
	if j, err := prod.Get(ctx, res.ID); err != nil || j.State != client.StateCompleted {
		t.Fatalf("get with a producer token: %v %v", j, err)
	}
}
