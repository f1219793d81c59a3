package client_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log"
	"os"
	"os/signal"
	"time"

	"github.com/spoolq/spool/client"
)

func ExampleClient_Enqueue() {
	c := client.New("http://127.0.0.1:7311")
	ctx := context.Background()
	res, err := c.Enqueue(ctx, client.EnqueueParams{
		Queue:       "emails",
		Kind:        "welcome",
		Payload:     map[string]int{"user": 42},
		Delay:       time.Minute,
		MaxAttempts: 5,
		UniqueKey:   "welcome-42", // a second enqueue while this one is pending is a duplicate
	})
	var apiErr *client.Error
	switch {
	case errors.As(err, &apiErr) && errors.Is(err, client.ErrInvalidArgument):
		log.Fatalf("bad %s: %s", apiErr.Field, apiErr.Message)
	case err != nil:
		log.Fatal(err)
	}
	fmt.Println(res.ID, res.State, res.Duplicate)
}

func ExampleWorker() {
	c := client.New("http://127.0.0.1:7311")
	w := client.NewWorker(c, client.WorkerConfig{Queues: []string{"emails"}, Concurrency: 10})
	w.Handle("welcome", func(ctx context.Context, j *client.Job) (any, error) {
		var p struct{ User int }
		if err := json.Unmarshal(j.Payload, &p); err != nil {
			return nil, client.NoRetry(err) // another attempt cannot fix the payload
		}
		// ctx ends if a user cancels the job or the worker stops.
		return map[string]bool{"sent": true}, nil
	})

	// Run until SIGINT, then let running jobs finish for up to
	// ShutdownTimeout and release the rest.
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if err := w.Run(ctx); err != nil {
		log.Fatal(err)
	}
}

func ExampleClient_ListAll() {
	c := client.New("http://127.0.0.1:7311")
	ctx := context.Background()
	for j, err := range c.ListAll(ctx, client.ListParams{Queue: "emails", State: client.StateDead}) {
		if err != nil {
			log.Fatal(err)
		}
		fmt.Println(j.ID, j.Errors[len(j.Errors)-1].Message)
	}
}

func ExampleClient_Fetch() {
	// A hand-written worker loop, for when Worker does not fit.
	c := client.New("http://127.0.0.1:7311")
	ctx := context.Background()
	jobs, err := c.Fetch(ctx, client.FetchParams{Queues: []string{"emails"}, Max: 10, Wait: 30 * time.Second})
	if err != nil {
		log.Fatal(err)
	}
	for _, j := range jobs {
		_, err := c.Ack(ctx, j.ID, j.Token(), map[string]bool{"sent": true})
		if errors.Is(err, client.ErrLeaseLost) {
			continue // the lease ran out and another worker owns the job: drop the result
		}
		if err != nil {
			log.Print(err)
		}
	}
}
