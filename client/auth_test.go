package client_test

import (
	"context"
	"errors"
	"testing"

	"github.com/spoolq/spool/client"
	"github.com/spoolq/spool/internal/config"
)

// The tokens of the server startAuthServer starts: a producer limited to
// the "mail." namespace and a worker for every queue.
const (
	producerToken = "producer-secret-0123456789"
	workerToken   = "worker-secret-0123456789ab"
)

// startAuthServer starts a server with auth on and the two tokens above,
// stopped when the test ends, and returns its base URL.
func startAuthServer(t *testing.T) string {
	t.Helper()
	cfg := config.Default()
	cfg.Addr = "127.0.0.1:0"
	cfg.Data = t.TempDir()
	cfg.Auth = true
	cfg.AuthTokens = "p producer mail. " + producerToken + "; w worker * " + workerToken
	srv, _ := startServer(t, cfg)
	return "http://" + srv.Addr()
}

// A client with WithToken works against a server with auth on; one without
// a token, or with a token of the wrong role or namespace, is refused with
// the matching sentinel.
func TestClientWithToken(t *testing.T) {
	t.Parallel()
	base := startAuthServer(t)
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	anon := client.New(base)
	prod := client.New(base, client.WithToken(producerToken))
	work := client.New(base, client.WithToken(workerToken))
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
