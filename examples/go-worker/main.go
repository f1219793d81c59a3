// Command go-worker runs the welcome jobs of the queue emails: the Go worker
// of the README's tour. SPOOL_SERVER names the server (default
// http://127.0.0.1:7311).
package main

import (
	"cmp"
	"context"
	"encoding/json"
	"log"
	"os"
	"os/signal"
	"syscall"

	"github.com/spoolq/spool/client"
)

func main() {
	c := client.New(cmp.Or(os.Getenv("SPOOL_SERVER"), "http://127.0.0.1:7311"))
	w := client.NewWorker(c, client.WorkerConfig{Queues: []string{"emails"}, Concurrency: 10})
	w.Handle("welcome", func(ctx context.Context, j *client.Job) (any, error) {
		var p struct{ User int }
		if err := json.Unmarshal(j.Payload, &p); err != nil {
			return nil, client.NoRetry(err)
		}
		log.Printf("welcoming user %d (attempt %d)", p.User, j.Attempt)
		return map[string]bool{"sent": true}, nil
	})
	// Until SIGINT or SIGTERM, then it finishes or hands back its jobs.
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := w.Run(ctx); err != nil {
		log.Fatal(err)
	}
}
