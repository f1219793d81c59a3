package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/spoolq/spool/client"
	"github.com/spoolq/spool/internal/config"
)

// cliCommands are the client subcommands, by name.
var cliCommands = map[string]func(args []string) int{
	"enqueue":         func(args []string) int { return stdCLI().enqueue(args) },
	"jobs":            func(args []string) int { return stdCLI().jobs(args) },
	"queues":          func(args []string) int { return stdCLI().queues(args) },
	"schedules":       func(args []string) int { return stdCLI().schedules(args) },
	"consumer-groups": func(args []string) int { return stdCLI().consumerGroups(args) },
	"fetch":           func(args []string) int { return stdCLI().fetch(args) },
	"ack":             func(args []string) int { return stdCLI().ackJob(args) },
	"fail":            func(args []string) int { return stdCLI().failJob(args) },
	"workers":         func(args []string) int { return stdCLI().workers(args) },
}

// cli runs client subcommands, reading what they read from standard input
// from in, writing results to out and problems to errOut.
type cli struct {
	in          io.Reader
	out, errOut io.Writer
	getenv      func(string) string
}

func stdCLI() *cli { return &cli{in: os.Stdin, out: os.Stdout, errOut: os.Stderr, getenv: os.Getenv} }

// stdin is what the commands read as standard input: in, or the
// process's when in is not set.
func (c *cli) stdin() io.Reader {
	if c.in == nil {
		return os.Stdin
	}
	return c.in
}

// common are the flags every client subcommand takes.
type common struct {
	server  string
	token   string
	asJSON  bool
	timeout time.Duration
}

// flags returns a flag set for the subcommand name with the common flags.
func (c *cli) flags(name, usage string) (*flag.FlagSet, *common) {
	fs := flag.NewFlagSet("spool "+name, flag.ContinueOnError)
	fs.SetOutput(c.errOut)
	var cm common
	server := c.getenv("SPOOL_SERVER")
	if server == "" {
		server = "http://" + config.DefaultAddr
	}
	fs.StringVar(&cm.server, "server", server, "base URL of the server (env SPOOL_SERVER)")
	fs.StringVar(&cm.token, "auth-token", c.getenv("SPOOL_TOKEN"), "bearer token when the server requires one (env SPOOL_TOKEN)")
	fs.BoolVar(&cm.asJSON, "json", false, "print JSON instead of a table")
	fs.DurationVar(&cm.timeout, "timeout", 90*time.Second, "longest time the command may take")
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "usage: spool %s\n\nflags:\n", usage)
		fs.PrintDefaults()
	}
	return fs, &cm
}

// parse parses args, flags and positional arguments in any order, and
// requires exactly positional of the latter. When parsing ends the command
// (help or bad input) ok is false and code is the exit code.
func parse(fs *flag.FlagSet, args []string, positional int) (pos []string, code int, ok bool) {
	for {
		if err := fs.Parse(args); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				return nil, 0, false
			}
			return nil, 2, false
		}
		args = fs.Args()
		if len(args) == 0 {
			break
		}
		pos, args = append(pos, args[0]), args[1:]
	}
	if len(pos) != positional {
		fmt.Fprintf(fs.Output(), "spool %s: want %d argument(s), got %d\n", strings.TrimPrefix(fs.Name(), "spool "), positional, len(pos))
		fs.Usage()
		return nil, 2, false
	}
	return pos, 0, true
}

// connect returns a client and a context bounded by the common flags.
func (cm *common) connect() (*client.Client, context.Context, context.CancelFunc) {
	var opts []client.Option
	if cm.token != "" {
		opts = append(opts, client.WithToken(cm.token))
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	ctx, cancel := context.WithTimeout(ctx, cm.timeout)
	return client.New(cm.server, opts...), ctx, func() { cancel(); stop() }
}

// report reports err and returns the exit code: 1 for errors answered by the
// server or the network.
func (c *cli) report(cmd string, err error) int {
	var e *client.Error
	if errors.As(err, &e) && e.Field != "" {
		fmt.Fprintf(c.errOut, "spool %s: %s (field %s)\n", cmd, e.Message, e.Field)
	} else {
		fmt.Fprintf(c.errOut, "spool %s: %v\n", cmd, err)
	}
	return 1
}

// printJSON writes v as indented JSON.
func (c *cli) printJSON(v any) int {
	enc := json.NewEncoder(c.out)
	enc.SetIndent("", "  ")
	if err := enc.Encode(v); err != nil {
		fmt.Fprintf(c.errOut, "spool: encode output: %v\n", err)
		return 1
	}
	return 0
}

// table writes rows under a header, aligned.
func (c *cli) table(header []string, rows [][]string) {
	tw := tabwriter.NewWriter(c.out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, strings.Join(header, "\t"))
	for _, r := range rows {
		fmt.Fprintln(tw, strings.Join(r, "\t"))
	}
	_ = tw.Flush()
}

// sub dispatches "spool <group> <sub> ...".
func (c *cli) sub(group string, args []string, subs map[string]func([]string) int, names string) int {
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" {
		fmt.Fprintf(c.errOut, "usage: spool %s <%s> [flags]\n", group, names)
		if len(args) == 0 {
			return 2
		}
		return 0
	}
	fn, ok := subs[args[0]]
	if !ok {
		fmt.Fprintf(c.errOut, "spool %s: unknown subcommand %q (want %s)\n", group, args[0], names)
		return 2
	}
	return fn(args[1:])
}

// shortTime formats t for tables: empty when zero.
func shortTime(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return t.Local().Format("2006-01-02 15:04:05")
}
