// Command comparebench runs one benchmark case against one job queue
// (Spool, asynq or River) through that system's own Go client and prints
// one JSON line with the outcome; `comparebench table` turns the lines of a
// whole run into a markdown table of medians. scripts/compare drives it
// (and bullmq.mjs for BullMQ), starting the servers each case needs.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"time"

	"github.com/spoolq/spool/client"
)

func main() {
	if len(os.Args) > 1 && os.Args[1] == "table" {
		if err := printTable(os.Stdin, os.Stdout); err != nil {
			fmt.Fprintln(os.Stderr, "comparebench table:", err)
			os.Exit(1)
		}
		return
	}
	var o options
	flag.StringVar(&o.system, "system", "", "spool, asynq or river")
	flag.StringVar(&o.label, "label", "", "column name of this system in the table (default: -system)")
	flag.StringVar(&o.caseName, "case", "", "seq, conc, bulk, drain50, drain500 or lat")
	flag.IntVar(&o.n, "n", 1000, "jobs in the case (lat: ignored, rate × duration)")
	flag.IntVar(&o.rep, "rep", 1, "repetition number, copied into the result")
	flag.StringVar(&o.spoolURL, "spool", "", "URL of the Spool server (system spool)")
	flag.StringVar(&o.durability, "durability", "", "Spool durability of every job: full or process (default: the queue's, full)")
	flag.StringVar(&o.redisAddr, "redis", "", "HOST:PORT of Redis (system asynq)")
	flag.StringVar(&o.pgURL, "pg", "", "PostgreSQL URL of an empty database (system river)")
	flag.DurationVar(&o.fetchCooldown, "fetch-cooldown", 0, "River FetchCooldown (0: River's default, 100 ms)")
	flag.DurationVar(&o.latDuration, "lat-duration", 5*time.Second, "how long the lat case enqueues")
	flag.IntVar(&o.latRate, "lat-rate", 1000, "jobs per second the lat case enqueues")
	flag.DurationVar(&o.timeout, "timeout", 2*time.Minute, "bound on the whole case")
	flag.Parse()
	if o.label == "" {
		o.label = o.system
	}

	res := result{System: o.label, Case: o.caseName, Rep: o.rep}
	err := run(&o, &res)
	switch {
	case errors.Is(err, errUnsupported):
		res.NA = true
	case err != nil:
		res.Error = err.Error()
	}
	line, _ := json.Marshal(res)
	fmt.Println(string(line))
	if err != nil && !errors.Is(err, errUnsupported) {
		os.Exit(1)
	}
}

// options are the command's flags.
type options struct {
	system, label, caseName string
	n, rep                  int
	spoolURL, durability    string
	redisAddr, pgURL        string
	fetchCooldown           time.Duration
	latDuration             time.Duration
	latRate                 int
	timeout                 time.Duration
}

// run opens the system, runs the case on it within the timeout, and fills res.
func run(o *options, res *result) error {
	ctx, cancel := context.WithTimeout(context.Background(), o.timeout)
	defer cancel()
	sys, err := openSystem(ctx, o)
	if err != nil {
		return err
	}
	defer sys.Close()
	c, ok := cases[o.caseName]
	if !ok {
		return fmt.Errorf("-case: unknown case %q", o.caseName)
	}
	if o.n < 1 {
		return fmt.Errorf("-n: %d is not a positive count", o.n)
	}
	return c(ctx, sys, o, res)
}

// openSystem connects to the system named by -system.
func openSystem(ctx context.Context, o *options) (queueSystem, error) {
	switch o.system {
	case "spool":
		if o.spoolURL == "" {
			return nil, errors.New("-spool: required for system spool")
		}
		switch client.Durability(o.durability) {
		case "", client.DurabilityFull, client.DurabilityProcess:
		default:
			return nil, fmt.Errorf("-durability: unknown level %q (full or process)", o.durability)
		}
		return openSpool(ctx, o.spoolURL, client.Durability(o.durability))
	case "asynq":
		if o.redisAddr == "" {
			return nil, errors.New("-redis: required for system asynq")
		}
		return openAsynq(o.redisAddr), nil
	case "river":
		if o.pgURL == "" {
			return nil, errors.New("-pg: required for system river")
		}
		return openRiver(ctx, o.pgURL, o.fetchCooldown)
	default:
		return nil, fmt.Errorf("-system: unknown system %q (spool, asynq or river)", o.system)
	}
}
