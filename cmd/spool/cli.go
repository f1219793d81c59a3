package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/spoolq/spool/client"
	"github.com/spoolq/spool/internal/config"
)

// stdin is what the commands read as standard input: in, or the
// process's when in is not set.
func (c *cli) stdin() io.Reader {
	if c.in == nil {
		return os.Stdin
	}
	return c.in
}

// common are the flags every client command takes.
type common struct {
	server  string
	token   string
	asJSON  bool
	timeout time.Duration
}

// addCommon defines the common flags on fs, their defaults read from
// SPOOL_SERVER and SPOOL_TOKEN.
func (c *cli) addCommon(fs *pflag.FlagSet) {
	server := c.getenv("SPOOL_SERVER")
	if server == "" {
		server = "http://" + config.DefaultAddr
	}
	fs.StringVar(&c.cm.server, "server", server, "URL of the server, or HOST:PORT for http:// (env SPOOL_SERVER)")
	fs.StringVar(&c.cm.token, "auth-token", c.getenv("SPOOL_TOKEN"), "bearer token when the server requires one (env SPOOL_TOKEN)")
	fs.BoolVar(&c.cm.asJSON, "json", false, "print JSON instead of a table")
	fs.DurationVar(&c.cm.timeout, "timeout", 90*time.Second, "longest time the command may take")
	// The token's value is no default to show in help.
	fs.Lookup("auth-token").DefValue = ""
}

// client makes cmd a client command: the common flags, local to it when
// persistent is false or for its subcommands too, and a check of --server
// before it runs.
func (c *cli) client(cmd *cobra.Command, persistent bool) *cobra.Command {
	if persistent {
		c.addCommon(cmd.PersistentFlags())
		cmd.PersistentPreRunE = c.checkServer
	} else {
		c.addCommon(cmd.Flags())
		cmd.PreRunE = c.checkServer
	}
	return cmd
}

// checkServer reads --server, taking HOST:PORT as http://HOST:PORT.
func (c *cli) checkServer(*cobra.Command, []string) error {
	u, err := serverURL(c.cm.server)
	if err != nil {
		return err
	}
	c.cm.server = u
	return nil
}

// serverURL is the base URL of the server s names: an http or https URL,
// or HOST:PORT for http://HOST:PORT.
func serverURL(s string) (string, error) {
	raw := strings.TrimSpace(s)
	if !strings.Contains(raw, "://") {
		raw = "http://" + raw
	}
	u, err := url.Parse(raw)
	if err != nil || u.Host == "" || (u.Scheme != "http" && u.Scheme != "https") {
		return "", usagef("--server %q is not a server: want http://HOST:PORT, https://HOST or HOST:PORT", s)
	}
	return strings.TrimRight(raw, "/"), nil
}

// connect returns a client and a context bounded by the common flags.
func (c *cli) connect() (*client.Client, context.Context, context.CancelFunc) {
	var opts []client.Option
	if c.cm.token != "" {
		opts = append(opts, client.WithToken(c.cm.token))
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	ctx, cancel := context.WithTimeout(ctx, c.cm.timeout)
	return client.New(c.cm.server, opts...), ctx, func() { cancel(); stop() }
}

// explain words err for the user: an error the server answered with the
// field it names, no answer at all with how to start a server.
func (c *cli) explain(err error) string {
	var e *client.Error
	if errors.As(err, &e) && e.Field != "" {
		return fmt.Sprintf("%s (field %s)", e.Message, e.Field)
	}
	var op *net.OpError
	if errors.As(err, &op) && op.Op == "dial" && c.cm.server != "" {
		if errors.Is(err, syscall.ECONNREFUSED) {
			return fmt.Sprintf("no Spool server answers at %s: start one with 'spool server' (or pass --server / set SPOOL_SERVER)", c.cm.server)
		}
		return fmt.Sprintf("no Spool server answers at %s (%v): check --server / SPOOL_SERVER, or start one with 'spool server'", c.cm.server, op.Err)
	}
	return err.Error()
}

// printJSON writes v as indented JSON.
func (c *cli) printJSON(v any) error {
	enc := json.NewEncoder(c.out)
	enc.SetIndent("", "  ")
	if err := enc.Encode(v); err != nil {
		return fmt.Errorf("encode output: %w", err)
	}
	return nil
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

// show prints v as JSON with --json, else with table.
func (c *cli) show(v any, table func()) error {
	if c.cm.asJSON {
		return c.printJSON(v)
	}
	table()
	return nil
}

// shortTime formats t for tables: empty when zero.
func shortTime(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return t.Local().Format("2006-01-02 15:04:05")
}
