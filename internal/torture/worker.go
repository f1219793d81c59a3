package torture

import (
	"bufio"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"sync"
	"syscall"
	"time"

	"github.com/spoolq/spool/client"
)

// Worker modes of RunWorker.
const (
	// ModeHang runs a client.Worker whose handler reports each job and
	// then blocks until its context ends: a worker busy with a long job,
	// heartbeating, for the harness to kill.
	ModeHang = "hang"
	// ModePoison runs a client.Worker whose handler kills its own process
	// (SIGKILL) on every job of kind "poison" and acks every other job of
	// kind "ok".
	ModePoison = "poison"
	// ModeStall leases one job with the plain client and does nothing with
	// it; for each line read on standard input it then extends, acks and
	// fails the job with its (by then stale) token and reports the
	// answers. The harness stops it with SIGSTOP in between.
	ModeStall = "stall"
)

// WorkerEvent is one line a worker process writes on standard output.
type WorkerEvent struct {
	// Event is "started" (a job was handed to the handler), "done" (a job
	// was acked), or "late" (the answer to a stale call of ModeStall).
	Event   string    `json:"event"`
	Job     string    `json:"job,omitempty"`
	Kind    string    `json:"kind,omitempty"`
	Attempt int       `json:"attempt,omitempty"`
	Token   int64     `json:"token,omitempty"`
	Op      string    `json:"op,omitempty"`
	Status  int       `json:"status,omitempty"`
	Code    string    `json:"code,omitempty"`
	Pid     int       `json:"pid"`
	At      time.Time `json:"at"`
}

// eventWriter writes WorkerEvents as JSON lines; safe for concurrent use.
type eventWriter struct {
	mu  sync.Mutex
	enc *json.Encoder
}

func (w *eventWriter) emit(e WorkerEvent) {
	e.Pid, e.At = os.Getpid(), time.Now()
	w.mu.Lock()
	defer w.mu.Unlock()
	_ = w.enc.Encode(e)
}

// RunWorker is the worker process of the worker scenarios
// (`spool-torture worker`): it takes jobs from a server as its --mode says
// and reports what it does as WorkerEvent lines on stdout. It returns the
// exit status.
func RunWorker(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("spool-torture worker", flag.ContinueOnError)
	fs.SetOutput(stderr)
	server := fs.String("server", "http://127.0.0.1:7311", "server URL")
	queue := fs.String("queue", "default", "queue to take jobs from")
	mode := fs.String("mode", ModeHang, "hang, poison or stall")
	lease := fs.Duration("lease", time.Second, "lease of each hand-out")
	concurrency := fs.Int("concurrency", 1, "jobs run at once (hang and poison)")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	out := &eventWriter{enc: json.NewEncoder(stdout)}
	c := client.New(*server)
	logger := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	var err error
	switch *mode {
	case ModeHang, ModePoison:
		err = runClientWorker(c, out, logger, *mode, *queue, *lease, *concurrency)
	case ModeStall:
		err = runStall(c, out, stdin, *queue, *lease)
	default:
		fmt.Fprintf(stderr, "spool-torture worker: unknown mode %q\n", *mode)
		return 2
	}
	if err != nil {
		fmt.Fprintf(stderr, "spool-torture worker: %v\n", err)
		return 1
	}
	return 0
}

func runClientWorker(c *client.Client, out *eventWriter, logger *slog.Logger, mode, queue string, lease time.Duration, concurrency int) error {
	w := client.NewWorker(c, client.WorkerConfig{
		Queues: []string{queue}, Concurrency: concurrency, Lease: lease, Wait: 5 * time.Second, Logger: logger,
	})
	started := func(j *client.Job) {
		out.emit(WorkerEvent{Event: "started", Job: j.ID, Kind: j.Kind, Attempt: j.Attempt, Token: j.Token()})
	}
	switch mode {
	case ModeHang:
		w.Handle("hang", func(ctx context.Context, j *client.Job) (any, error) {
			started(j)
			<-ctx.Done()
			return nil, context.Cause(ctx)
		})
	case ModePoison:
		w.Handle("poison", func(ctx context.Context, j *client.Job) (any, error) {
			started(j)
			if self, err := os.FindProcess(os.Getpid()); err == nil {
				_ = self.Kill() // SIGKILL: no deferred call, no cleanup
			}
			select {} // never reached: the process is gone
		})
		w.Handle("ok", func(ctx context.Context, j *client.Job) (any, error) {
			started(j)
			return map[string]string{"by": "poison-worker"}, nil
		})
	}
	ctx, stop := signalContext()
	defer stop()
	return w.Run(ctx)
}

// runStall leases one job and, for each line of stdin, sends the stale
// extend, ack and fail.
func runStall(c *client.Client, out *eventWriter, stdin io.Reader, queue string, lease time.Duration) error {
	ctx := context.Background()
	var j *client.Job
	for j == nil {
		jobs, err := c.Fetch(ctx, client.FetchParams{Queues: []string{queue}, Max: 1, Wait: 5 * time.Second, Lease: lease, Worker: "stall"})
		if err != nil {
			return fmt.Errorf("fetch: %w", err)
		}
		if len(jobs) > 0 {
			j = jobs[0]
		}
	}
	out.emit(WorkerEvent{Event: "started", Job: j.ID, Kind: j.Kind, Attempt: j.Attempt, Token: j.Token()})
	lines := bufio.NewScanner(stdin)
	for lines.Scan() {
		late := func(op string, err error) {
			o := classify(err)
			out.emit(WorkerEvent{Event: "late", Job: j.ID, Token: j.Token(), Op: op, Status: o.status, Code: o.code})
		}
		_, err := c.Extend(ctx, j.ID, j.Token(), lease)
		late("extend", err)
		_, err = c.Ack(ctx, j.ID, j.Token(), map[string]string{"by": "stalled-worker"})
		late("ack", err)
		_, err = c.Fail(ctx, j.ID, j.Token(), client.FailParams{Error: "stalled worker"})
		late("fail", err)
	}
	return lines.Err()
}

// signalContext ends on SIGTERM or SIGINT.
func signalContext() (context.Context, context.CancelFunc) {
	return signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
}
