package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// cli runs the spool command, reading what its commands read from
// standard input from in, writing results to out and problems to errOut,
// and reading the environment through getenv.
type cli struct {
	in          io.Reader
	out, errOut io.Writer
	getenv      func(string) string

	// cm holds the flags every client command takes; one cli runs one
	// command.
	cm common
}

func stdCLI() *cli { return &cli{in: os.Stdin, out: os.Stdout, errOut: os.Stderr, getenv: os.Getenv} }

// exitError ends a command with its exit code once the command has said
// why.
type exitError int

func (e exitError) Error() string { return "exit status " + strconv.Itoa(int(e)) }

// usageError is a command line the command cannot run: it is reported on
// one line with a pointer to the command's help, and exits 2.
type usageError struct {
	msg string
	// named: msg names the command itself, and the line starts "spool:".
	named bool
}

func (e *usageError) Error() string { return e.msg }

func usagef(format string, a ...any) error { return &usageError{msg: fmt.Sprintf(format, a...)} }

// run runs the command line args and returns the exit code: 0 when it
// succeeded, 2 for a command line it cannot run, 1 for any other failure.
func (c *cli) run(args []string) int {
	root := c.rootCommand()
	root.SetArgs(args)
	cmd, err := root.ExecuteC()
	if err == nil {
		return 0
	}
	if cmd == nil {
		cmd = root
	}
	var exit exitError
	var usage *usageError
	switch {
	case errors.As(err, &exit):
		return int(exit)
	case errors.As(err, &usage):
		prefix := cmd.CommandPath()
		if usage.named {
			prefix = "spool"
		}
		msg := usage.msg
		if !strings.HasSuffix(msg, "?") && !strings.HasSuffix(msg, ".") {
			msg += "."
		}
		fmt.Fprintf(c.errOut, "%s: %s See '%s --help'.\n", prefix, msg, cmd.CommandPath())
		return 2
	}
	if name, ok := unknownCommand(err); ok {
		hint := didYouMean(closest(name, commandNames(root)), strconv.Quote)
		if hint == "" {
			hint = "."
		}
		fmt.Fprintf(c.errOut, "spool: unknown command %q%s See 'spool --help'.\n", name, hint)
		return 2
	}
	fmt.Fprintf(c.errOut, "%s: %s\n", cmd.CommandPath(), c.explain(err))
	return 1
}

// unknownCommand reads the name out of cobra's error for a command that
// does not exist.
func unknownCommand(err error) (string, bool) {
	rest, ok := strings.CutPrefix(err.Error(), "unknown command ")
	if !ok {
		return "", false
	}
	name, err := strconv.QuotedPrefix(rest)
	if err != nil {
		return "", false
	}
	name, err = strconv.Unquote(name)
	return name, err == nil
}

// commandNames are the names and aliases of the commands under cmd that a
// user may type.
func commandNames(cmd *cobra.Command) []string {
	var names []string
	for _, sub := range cmd.Commands() {
		if sub.IsAvailableCommand() || sub.Name() == "help" {
			names = append(names, sub.Name())
			names = append(names, sub.Aliases...)
		}
	}
	return names
}

const rootLong = `Spool is a durable background job queue in one binary.

'spool server' runs a node; the client commands talk to a running one at
--server (env SPOOL_SERVER, default http://127.0.0.1:7311) and print
tables, or JSON with --json. Fault and soak tests are a command of their
own: spool-torture (docs/reliability.md).`

const rootExample = `  spool server                                   # a node on 127.0.0.1:7311, data in ./spool-data
  spool enqueue --queue emails --kind welcome --payload '{"user":42}'
  spool jobs list --queue emails --state dead
  spool queues pause emails`

// rootCommand builds the command tree.
func (c *cli) rootCommand() *cobra.Command {
	root := &cobra.Command{
		Use:           "spool",
		Short:         "Spool: a durable background job queue",
		Long:          rootLong,
		Example:       rootExample,
		Version:       version(),
		SilenceErrors: true,
		SilenceUsage:  true,
		// Without a command the line is incomplete: help, as a usage
		// error.
		RunE: func(cmd *cobra.Command, args []string) error {
			cmd.SetOut(c.errOut)
			_ = cmd.Help()
			return exitError(2)
		},
	}
	root.SetIn(c.stdin())
	root.SetOut(c.out)
	root.SetErr(c.errOut)
	root.SetVersionTemplate("{{.Version}}\n")
	root.SetFlagErrorFunc(flagError)
	root.CompletionOptions.HiddenDefaultCmd = true
	root.AddGroup(&cobra.Group{ID: "server", Title: "Server commands:"}, &cobra.Group{ID: "client", Title: "Client commands (talk to --server):"})
	for _, cmd := range []*cobra.Command{c.serverCommand(), c.benchCommand(), c.migrateCommand(), c.migrateStoreCommand()} {
		cmd.GroupID = "server"
		root.AddCommand(cmd)
	}
	for _, cmd := range []*cobra.Command{c.enqueueCommand(), c.jobsCommand(), c.queuesCommand(), c.schedulesCommand(),
		c.consumerGroupsCommand(), c.workersCommand(), c.fetchCommand(), c.ackCommand(), c.failCommand()} {
		cmd.GroupID = "client"
		root.AddCommand(cmd)
	}
	root.AddCommand(c.versionCommand())
	return root
}

// flagError turns a flag cobra could not parse into one line naming the
// flag, the command, and the flag meant when one is near.
func flagError(cmd *cobra.Command, err error) error {
	var names []string
	cmd.Flags().VisitAll(func(f *pflag.Flag) {
		if !f.Hidden {
			names = append(names, f.Name)
		}
	})
	dashed := func(s string) string { return "--" + s }
	in := fmt.Sprintf(" for %q", cmd.CommandPath())
	named := func(format string, a ...any) error { return &usageError{msg: fmt.Sprintf(format, a...), named: true} }
	var notExist *pflag.NotExistError
	var invalid *pflag.InvalidValueError
	var required *pflag.ValueRequiredError
	switch {
	case errors.As(err, &notExist) && notExist.GetSpecifiedShortnames() == "":
		name := notExist.GetSpecifiedName()
		return named("unknown flag --%s%s%s", name, in, didYouMean(closest(name, names), dashed))
	case errors.As(err, &notExist):
		// "-queue" is read as the shorthands -q -u -e …: the long flag is
		// the likely meaning.
		short := notExist.GetSpecifiedShortnames()
		word, _, _ := strings.Cut(short, "=")
		hint := didYouMean(closest(word, names), dashed)
		if cmd.Flags().Lookup(word) != nil {
			hint = didYouMean(word, dashed)
		}
		return named("unknown flag -%s%s (long flags take two dashes)%s", short, in, hint)
	case errors.As(err, &invalid):
		return named("invalid value %q for --%s of %q: %s", invalid.GetValue(), invalid.GetFlag().Name, cmd.CommandPath(), wanted(invalid))
	case errors.As(err, &required):
		return named("flag --%s%s needs a value", required.GetFlag().Name, in)
	}
	return named("%v%s", err, in)
}

// wanted says what a flag's value should have been: the form its type
// takes, or what the flag's own parser said.
func wanted(e *pflag.InvalidValueError) string {
	switch e.GetFlag().Value.Type() {
	case "int", "int64":
		return "want a whole number"
	case "float64":
		return "want a number"
	case "duration":
		return "want a duration such as 90s, 5m or 1h30m"
	case "bool":
		return "want true or false"
	}
	return errors.Unwrap(e).Error()
}

// group returns a command that only holds subcommands. Without one it
// prints its help as a usage error; with a word that names none it
// suggests the nearest.
func (c *cli) group(cmd *cobra.Command, subs ...*cobra.Command) *cobra.Command {
	cmd.Args = cobra.ArbitraryArgs
	cmd.FParseErrWhitelist = cobra.FParseErrWhitelist{UnknownFlags: true}
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		if len(args) == 0 {
			cmd.SetOut(c.errOut)
			_ = cmd.Help()
			return exitError(2)
		}
		return usagef("unknown subcommand %q%s", args[0], didYouMean(closest(args[0], commandNames(cmd)), strconv.Quote))
	}
	cmd.AddCommand(subs...)
	return cmd
}

// exactArgs requires n arguments, named by names for the message.
func exactArgs(n int, names string) cobra.PositionalArgs {
	return func(cmd *cobra.Command, args []string) error {
		if len(args) != n {
			return usagef("want %d argument(s) (%s), got %d", n, names, len(args))
		}
		return nil
	}
}

// noArgs refuses any argument: the command takes flags only.
func noArgs(cmd *cobra.Command, args []string) error {
	if len(args) > 0 {
		return usagef("want 0 arguments, got %d: unexpected argument %q", len(args), args[0])
	}
	return nil
}

// version describes the build: the module version, the VCS revision and
// time when the build recorded them, and the Go version.
func version() string {
	v := "(devel)"
	var rev, at string
	modified := false
	if info, ok := debug.ReadBuildInfo(); ok {
		if info.Main.Version != "" {
			v = info.Main.Version
		}
		for _, s := range info.Settings {
			switch s.Key {
			case "vcs.revision":
				rev = s.Value
			case "vcs.time":
				at = s.Value
			case "vcs.modified":
				modified = s.Value == "true"
			}
		}
	}
	out := "spool " + v
	if rev != "" {
		if len(rev) > 12 {
			rev = rev[:12]
		}
		if modified {
			rev += "+modified"
		}
		out += " (revision " + rev
		if at != "" {
			out += ", " + at
		}
		out += ")"
	}
	return out + " " + runtime.Version() + " " + runtime.GOOS + "/" + runtime.GOARCH
}

func (c *cli) versionCommand() *cobra.Command {
	return &cobra.Command{
		Use:     "version",
		Short:   "Print the version, VCS revision and Go version of this build",
		Example: "  spool version\n  spool --version",
		Args:    noArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			fmt.Fprintln(c.out, version())
			return nil
		},
	}
}
