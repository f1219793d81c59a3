// Command spool is the Spool job queue: `spool server` runs a node; bench
// measures one; migrate and migrate-store set up and fill a PostgreSQL
// store; the other subcommands are a command-line client of a running
// node. The fault and soak harness is a command of its own,
// spool-torture, which runs this binary as the server under test.
package main

import (
	"os"

	// The IANA time zone database, inside the binary: every node reads a
	// schedule's time zone the same way, whatever its host has installed.
	_ "time/tzdata"
)

func main() {
	os.Exit(run(os.Args[1:]))
}

// run runs the command line args as the process's command and returns the
// exit code.
func run(args []string) int { return stdCLI().run(args) }
