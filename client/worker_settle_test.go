package client_test

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/spoolq/spool/client"
	"github.com/spoolq/spool/internal/config"
)

// syncBuffer is a bytes.Buffer safe for a logger's concurrent writes.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// waitMetric polls the server's metrics until series reaches want, or
// fails the test after limit, and returns its value. A request's counter
// moves once its answer is written, which the client may read first.
func (b *bundle) waitMetric(series string, want float64, limit time.Duration) float64 {
	b.t.Helper()
	deadline := time.Now().Add(limit)
	for {
		v := b.metrics()[series]
		if v >= want || time.Now().After(deadline) {
			return v
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Two acks share one batch call, and the token of one of them is stale:
// the server refuses that job alone, the worker drops its result as it
// drops a single ack refused with lease_lost, and the other job is acked.
func TestWorkerStaleTokenInABatchFailsOnlyItsJob(t *testing.T) {
	t.Parallel()
	eachTransport(t, func(t *testing.T, b *bundle) {
		stale := b.enqueue(client.EnqueueParams{Queue: "w", Kind: "k"})
		kept := b.enqueue(client.EnqueueParams{Queue: "w", Kind: "k"})
		logs := &syncBuffer{}
		w := client.NewWorker(b.c, client.WorkerConfig{Queues: []string{"w"}, Concurrency: 2, Wait: time.Second,
			HeartbeatInterval: time.Minute, Logger: slog.New(slog.NewTextHandler(logs, nil))})
		client.HoldOutcomes(w, 2) // the two acks go in one call
		started := make(chan *client.Job, 2)
		release := make(chan struct{})
		w.Handle("k", func(ctx context.Context, j *client.Job) (any, error) {
			started <- j
			<-release
			return "done by the worker", nil
		})
		done := runWorker(t, w)
		held := map[string]*client.Job{}
		for i := 0; i < 2; i++ {
			j := recv(t, started, 10*time.Second, "the handlers")
			held[j.ID] = j
		}
		// The lease of one job goes to another holder: the worker's token
		// for it is stale, which it learns only from its ack.
		if _, err := b.c.Release(b.ctx, stale, held[stale].Token()); err != nil {
			t.Fatal(err)
		}
		other := b.fetchOne("w")
		if other.ID != stale {
			t.Fatalf("fetched %s, want %s", other.ID, stale)
		}
		const batchAcks = `spool_http_requests_total{code="200",route="POST /v1/jobs/ack"}`
		close(release)

		if j := b.waitState(kept, client.StateCompleted, 10*time.Second); string(j.Result) != `"done by the worker"` {
			t.Fatalf("kept job's result %s", j.Result)
		}
		if n := b.waitMetric(batchAcks, 1, 5*time.Second); n != 1 {
			t.Fatalf("%v batch ack calls, want the one both acks shared", n)
		}
		j := b.get(stale)
		if j.State != client.StateActive || j.Lease == nil || j.Lease.Token != other.Token() || j.Result != nil {
			t.Fatalf("the job whose token was stale: %+v", j)
		}
		deadline := time.Now().Add(5 * time.Second)
		for !strings.Contains(logs.String(), "ack refused: the lease was lost") {
			if time.Now().After(deadline) {
				t.Fatalf("the worker did not report the refused ack; its logs:\n%s", logs)
			}
			time.Sleep(10 * time.Millisecond)
		}
		if !strings.Contains(logs.String(), "job_id="+stale) {
			t.Fatalf("the refusal does not name job %s:\n%s", stale, logs)
		}
		// The other holder's lease is whole.
		if _, err := b.c.Ack(b.ctx, stale, other.Token(), "done by the other holder"); err != nil {
			t.Fatalf("ack by the current holder: %v", err)
		}
		stopWorker(t, w, done)
	})
}

// A result over the server's limit refuses the whole batch call, naming
// its item: that job alone fails for good, as it would alone, and the
// other job of the call is acked.
func TestWorkerOversizedResultInABatchFailsOnlyItsJob(t *testing.T) {
	t.Parallel()
	b := setupConfig(t, func(c *config.Config) { c.MaxPayloadBytes = 1 << 10 })
	big := b.enqueue(client.EnqueueParams{Queue: "w", Kind: "k", Payload: "big"})
	small := b.enqueue(client.EnqueueParams{Queue: "w", Kind: "k", Payload: "small"})
	w := b.worker(client.WorkerConfig{Queues: []string{"w"}, Concurrency: 2})
	client.HoldOutcomes(w, 2)
	w.Handle("k", func(ctx context.Context, j *client.Job) (any, error) {
		if string(j.Payload) == `"big"` {
			return strings.Repeat("x", 2<<10), nil
		}
		return "small result", nil
	})
	done := runWorker(t, w)
	if j := b.waitState(small, client.StateCompleted, 10*time.Second); string(j.Result) != `"small result"` {
		t.Fatalf("small job's result %s", j.Result)
	}
	j := b.waitState(big, client.StateDead, 10*time.Second)
	if len(j.Errors) != 1 || !strings.Contains(j.Errors[0].Message, "store result") || j.Result != nil {
		t.Fatalf("job with an oversized result: %+v", j)
	}
	// One call with both acks, refused; then the small job's again.
	refused := b.waitMetric(`spool_http_requests_total{code="413",route="POST /v1/jobs/ack"}`, 1, 5*time.Second)
	acked := b.waitMetric(`spool_http_requests_total{code="200",route="POST /v1/jobs/ack"}`, 1, 5*time.Second)
	if refused != 1 || acked != 1 {
		t.Fatalf("ack calls: %v refused, %v answered; want the shared call refused and the small job's answered", refused, acked)
	}
	stopWorker(t, w, done)
}

// killChildEnv names the server a child process of
// TestWorkerKilledBeforeItsAckIsSent works for.
const killChildEnv = "SPOOL_TEST_KILLED_WORKER"

// A worker that dies after a handler returned, before the job's ack was
// sent, leaves the job to be handed out again once its lease ends. The
// worker runs in a child process (this test binary, run again) that holds
// its acks back and says when one waits; the test kills it there.
func TestWorkerKilledBeforeItsAckIsSent(t *testing.T) {
	if base := os.Getenv(killChildEnv); base != "" {
		runKilledWorker(base)
		return
	}
	t.Parallel()
	b := setup(t)
	id := b.enqueue(client.EnqueueParams{Queue: "kill", Kind: "k", Lease: time.Second})

	cmd := exec.Command(os.Args[0], "-test.run=^TestWorkerKilledBeforeItsAckIsSent$", "-test.count=1")
	cmd.Env = append(os.Environ(), killChildEnv+"="+b.base)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatalf("start the worker: %v", err)
	}
	killed := false
	t.Cleanup(func() {
		if !killed {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
		}
	})
	queued := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			if rest, ok := strings.CutPrefix(sc.Text(), "QUEUED "); ok {
				queued <- rest
			}
		}
	}()
	if got := recv(t, queued, 15*time.Second, "the child's handler to return"); got != id {
		t.Fatalf("the child queued the outcome of %s, want %s", got, id)
	}
	held := b.get(id)
	if held.State != client.StateActive || held.Lease == nil {
		t.Fatalf("job whose handler returned in the child: %+v", held)
	}
	if err := cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	killed = true
	_ = cmd.Wait()

	// The ack was never sent: the job is still the dead worker's, or
	// already taken back if its lease ran out meanwhile.
	j := b.get(id)
	if (j.State != client.StateActive && j.State != client.StateAvailable) || j.Attempt != 1 || j.Result != nil {
		t.Fatalf("job after its worker died with the ack unsent: %+v", j)
	}
	first := held.Lease.Token
	b.waitState(id, client.StateAvailable, 10*time.Second)
	again := b.fetchOne("kill")
	if again.ID != id || again.Attempt != 2 || again.Token() <= first {
		t.Fatalf("job handed out again: id %s attempt %d token %d (first token %d)", again.ID, again.Attempt, again.Token(), first)
	}
}

// runKilledWorker is the child of TestWorkerKilledBeforeItsAckIsSent: a
// worker whose acks wait until two are ready, which never happens, and
// that prints the id of each as it starts waiting. It runs until killed.
func runKilledWorker(base string) {
	w := client.NewWorker(client.New(base), client.WorkerConfig{Queues: []string{"kill"}, Concurrency: 1,
		Logger: quietLogger()})
	client.HoldOutcomes(w, 2)
	client.OnOutcomeQueued(w, func(id string) { fmt.Printf("QUEUED %s\n", id) })
	w.Handle("k", func(ctx context.Context, j *client.Job) (any, error) { return "never stored", nil })
	err := w.Run(context.Background())
	fmt.Fprintln(os.Stderr, "the worker returned:", errors.Join(err, errors.New("it should have been killed")))
	os.Exit(1)
}
