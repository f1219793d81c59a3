// Command bench_go drains a queue of no-op jobs with the Go client's
// Worker and prints the rate, for scripts/bench-sdks: it compares the Go,
// Python and TypeScript workers on the same server.
package main

import (
	"context"
	"flag"
	"fmt"
	"log"
	"os"
	"time"

	"github.com/spoolq/spool/client"
)

func main() {
	queue := flag.String("queue", "bench-go", "queue to drain")
	jobs := flag.Int64("jobs", 20000, "jobs in the queue")
	concurrency := flag.Int("concurrency", 100, "handlers at once")
	flag.Parse()
	c := client.New(os.Getenv("SPOOL_URL"))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	w := client.NewWorker(c, client.WorkerConfig{Queues: []string{*queue}, Concurrency: *concurrency, Name: "bench-go"})
	w.Handle("noop", func(context.Context, *client.Job) (any, error) { return nil, nil })
	start := time.Now()
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx) }()
	for {
		q, err := c.Queue(ctx, *queue)
		if err != nil {
			log.Fatal(err)
		}
		if int64(q.Counts.Completed) >= *jobs {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	elapsed := time.Since(start)
	cancel()
	<-done
	fmt.Printf("go %d %.3f %.0f\n", *jobs, elapsed.Seconds(), float64(*jobs)/elapsed.Seconds())
}
