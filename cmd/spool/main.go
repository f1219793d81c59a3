// Command spool is the Spool job queue: `spool server` runs a node; bench
// measures one; migrate and migrate-store set up and fill a PostgreSQL
// store; the other subcommands are a command-line client of a running
// node. The fault and soak harness is a command of its own,
// spool-torture, which runs this binary as the server under test.
package main

import (
	"fmt"
	"os"

	// The IANA time zone database, inside the binary: every node reads a
	// schedule's time zone the same way, whatever its host has installed.
	_ "time/tzdata"
)

const usage = `usage: spool <command> [flags]

Server:
  server      run a Spool node (embedded SQLite in ./spool-data by default)
  bench       measure a server's throughput and latency
  migrate     apply the PostgreSQL schema migrations (spool migrate --db postgres://…)
  migrate-store  copy an embedded store into PostgreSQL (--from sqlite:DIR --to postgres://…)

Client (talks to --server, default http://127.0.0.1:7311; --json for scripts):
  enqueue     enqueue a job
  jobs        list, get, cancel, retry or delete jobs
  queues      list, show, pause, resume or purge queues; set their durability, limits and settings (dead-letter queue, maximum wait); retry or delete jobs by state
  schedules   list, show, put, delete, pause, resume or trigger cron schedules
  consumer-groups  list, show, create, seek or delete the consumer groups of a queue
  workers     list the workers the server has seen fetch, with the jobs each holds
  fetch       lease jobs as a worker would
  ack, fail   finish a leased job

Run "spool <command> -h" for the flags of a command. Fault and soak tests
are a command of their own: spool-torture (docs/reliability.md).
`

func main() {
	os.Exit(run(os.Args[1:]))
}

func run(args []string) int {
	if len(args) == 0 {
		fmt.Fprint(os.Stderr, usage)
		return 2
	}
	cmd, rest := args[0], args[1:]
	switch cmd {
	case "server":
		return runServer(rest)
	case "bench":
		return runBench(rest)
	case "migrate":
		return runMigrate(rest)
	case "migrate-store":
		return runMigrateStore(rest)
	case "help", "-h", "--help":
		fmt.Fprint(os.Stdout, usage)
		return 0
	}
	if c, ok := cliCommands[cmd]; ok {
		return c(rest)
	}
	fmt.Fprintf(os.Stderr, "spool: unknown command %q\n\n%s", cmd, usage)
	return 2
}
