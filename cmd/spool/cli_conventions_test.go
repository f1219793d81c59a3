package main

import (
	"bytes"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/spf13/cobra"
)

// runCLI runs a command line with no server in the environment, as a user
// who has set nothing would.
func runCLI(t *testing.T, env map[string]string, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errOut bytes.Buffer
	c := &cli{in: strings.NewReader(""), out: &out, errOut: &errOut, getenv: func(k string) string { return env[k] }}
	code = c.run(args)
	return code, out.String(), errOut.String()
}

// freeAddr is a loopback address nothing listens on.
func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return addr
}

func TestHelpListsEveryCommand(t *testing.T) {
	t.Parallel()
	code, out, errOut := runCLI(t, nil, "--help")
	if code != 0 || errOut != "" {
		t.Fatalf("spool --help: exit %d, stderr %q", code, errOut)
	}
	for _, name := range []string{"server", "bench", "migrate", "migrate-store", "enqueue", "jobs", "queues", "schedules",
		"consumer-groups", "workers", "fetch", "ack", "fail", "version"} {
		if !hasRow(out, name) {
			t.Errorf("spool --help lists no %q:\n%s", name, out)
		}
	}
	// Every command a user can reach says what it does and shows how.
	var walk func(cmd *cobra.Command)
	walk = func(cmd *cobra.Command) {
		for _, sub := range cmd.Commands() {
			if !sub.IsAvailableCommand() || sub.Name() == "help" {
				continue
			}
			if sub.Short == "" || sub.Example == "" {
				t.Errorf("%s: short %q, example %q; want both", sub.CommandPath(), sub.Short, sub.Example)
			}
			walk(sub)
		}
	}
	walk((&cli{getenv: func(string) string { return "" }}).rootCommand())
}

func TestSubcommandHelp(t *testing.T) {
	t.Parallel()
	code, out, _ := runCLI(t, nil, "jobs", "--help")
	for _, want := range []string{"list", "get", "cancel", "retry", "delete", "transact", "--server", "--json", "Examples:", "spool jobs list"} {
		if code != 0 || !strings.Contains(out, want) {
			t.Errorf("spool jobs --help: exit %d, no %q in\n%s", code, want, out)
		}
	}
	code, out, _ = runCLI(t, nil, "jobs", "list", "--help")
	for _, want := range []string{"--queue", "--state", "--limit int", "(default 50)", "--server", "Examples:"} {
		if code != 0 || !strings.Contains(out, want) {
			t.Errorf("spool jobs list --help: exit %d, no %q in\n%s", code, want, out)
		}
	}
	code, out, _ = runCLI(t, nil, "server", "--help")
	for _, want := range []string{"--addr", `(default "127.0.0.1:7311")`, "--data", `(default "./spool-data")`, "--db", "--log-level",
		"--auth ", "--config", "Examples:"} {
		if code != 0 || !strings.Contains(out, want) {
			t.Errorf("spool server --help: exit %d, no %q in\n%s", code, want, out)
		}
	}
	if code, _, errOut := runCLI(t, nil, "jobs"); code != 2 || !strings.Contains(errOut, "Available Commands") {
		t.Errorf("spool jobs: exit %d %q, want 2 with the help", code, errOut)
	}
}

func TestVersion(t *testing.T) {
	t.Parallel()
	_, cmd, _ := runCLI(t, nil, "version")
	_, flag, _ := runCLI(t, nil, "--version")
	if !strings.HasPrefix(cmd, "spool ") || !strings.Contains(cmd, runtime.Version()) || strings.Count(cmd, "\n") != 1 {
		t.Fatalf("spool version: %q", cmd)
	}
	if flag != cmd {
		t.Fatalf("spool --version %q, spool version %q: want the same", flag, cmd)
	}
}

// A mistyped command, subcommand or flag is one line naming the fix, and
// exit 2.
func TestDidYouMean(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"enqeue", "--kind", "k"}, `spool: unknown command "enqeue"; did you mean "enqueue"? See 'spool --help'.`},
		{[]string{"queues", "pase", "emails"}, `spool queues: unknown subcommand "pase"; did you mean "pause"? See 'spool queues --help'.`},
		{[]string{"jobs", "lsit", "--queue", "q"}, `did you mean "list"?`},
		{[]string{"enqueue", "--queu", "emails", "--kind", "k"},
			`spool: unknown flag --queu for "spool enqueue"; did you mean --queue? See 'spool enqueue --help'.`},
		{[]string{"enqueue", "-queue", "emails"}, `(long flags take two dashes); did you mean --queue?`},
		{[]string{"jobs", "list", "--limit", "many"}, `invalid value "many" for --limit of "spool jobs list": want a whole number.`},
		{[]string{"server", "--adr", "127.0.0.1:0"}, `did you mean --addr?`},
		{[]string{"bench", "--mdoe", "enqueue"}, `did you mean --mode?`},
	} {
		code, out, errOut := runCLI(t, nil, tc.args...)
		if code != 2 || out != "" || strings.Count(errOut, "\n") != 1 || !strings.Contains(errOut, tc.want) {
			t.Errorf("spool %s: exit %d, stdout %q, stderr %q; want exit 2 and one line with %q", strings.Join(tc.args, " "), code, out, errOut, tc.want)
		}
	}
}

// With no server at the address, the error names it and how to start one,
// whether the address came from --server or SPOOL_SERVER.
func TestNoServer(t *testing.T) {
	t.Parallel()
	addr := freeAddr(t)
	for _, env := range []map[string]string{nil, {"SPOOL_SERVER": "http://" + addr}} {
		args := []string{"queues", "list"}
		if env == nil {
			args = append(args, "--server", "http://"+addr)
		}
		code, _, errOut := runCLI(t, env, args...)
		want := "spool queues list: no Spool server answers at http://" + addr + ": start one with 'spool server' (or pass --server / set SPOOL_SERVER)\n"
		if code != 1 || errOut != want {
			t.Errorf("env %v: exit %d %q, want exit 1 and %q", env, code, errOut, want)
		}
	}
}

func TestServerWithoutScheme(t *testing.T) {
	t.Parallel()
	b := setupCLI(t)
	hostPort := strings.TrimPrefix(b.server, "http://")
	b.ok("enqueue", "--queue", "emails", "--kind", "k", "--server", hostPort)
	if out := b.ok("queues", "list", "--server", hostPort); !hasRow(out, "emails", "no", "full", "0", "1") {
		t.Fatalf("queues list --server %s:\n%s", hostPort, out)
	}
	b.refused([]refusal{{[]string{"queues", "list", "--server", "ftp://" + hostPort}, 2, "is not a server"}})
}

// Acting on a queue that does not exist creates it only with --create;
// without, the command suggests the queue meant and changes nothing.
func TestMissingQueueNeedsCreate(t *testing.T) {
	t.Parallel()
	b := setupCLI(t)
	b.ok("enqueue", "--queue", "emails", "--kind", "welcome")
	b.refused([]refusal{
		{[]string{"queues", "pause", "emial"}, 1, `queue "emial" does not exist; did you mean "emails"? pass --create to create it paused`},
		{[]string{"queues", "resume", "emial"}, 1, `did you mean "emails"?`},
		{[]string{"queues", "durability", "reports", "process"}, 1, `queue "reports" does not exist; pass --create`},
		{[]string{"queues", "limits", "reports", "--max-active", "2"}, 1, "pass --create"},
		{[]string{"queues", "limits", "reports", "--clear"}, 1, "pass --create"},
		{[]string{"queues", "settings", "reports", "--max-wait", "1m"}, 1, "pass --create"},
	})
	qs := b.okJSON("queues", "list")["queues"].([]any)
	if len(qs) != 1 || qs[0].(map[string]any)["name"] != "emails" {
		t.Fatalf("refused commands created queues: %v", qs)
	}
	if q := b.okJSON("queues", "pause", "emails"); q["paused"] != true {
		t.Fatalf("pause of an existing queue: %v", q)
	}
	if q := b.okJSON("queues", "pause", "reports", "--create"); q["name"] != "reports" || q["paused"] != true {
		t.Fatalf("pause --create: %v", q)
	}
	if out := b.ok("queues", "list"); !hasRow(out, "reports", "yes") {
		t.Fatalf("queues list after pause --create:\n%s", out)
	}
	if q := b.okJSON("queues", "durability", "audit", "process", "--create"); q["durability"] != "process" {
		t.Fatalf("durability --create: %v", q)
	}
}

// A port in use is reported before the data folder is created.
func TestServerBusyPort(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	data := filepath.Join(t.TempDir(), "spool-data")
	code, _, errOut := runCLI(t, nil, "server", "--addr", ln.Addr().String(), "--data", data)
	if code != 1 || !strings.Contains(errOut, ln.Addr().String()) || !strings.Contains(errOut, "already in use") || strings.Count(errOut, "\n") != 1 {
		t.Fatalf("server on a busy port: exit %d %q", code, errOut)
	}
	if _, err := os.Stat(data); !os.IsNotExist(err) {
		t.Fatalf("server on a busy port made its data folder: stat: %v", err)
	}
}

// A bad server setting is a usage error from config, reached through the
// flags of the command.
func TestServerBadSetting(t *testing.T) {
	t.Parallel()
	code, _, errOut := runCLI(t, nil, "server", "--addr", "127.0.0.1:0", "--max-batch", "many", "--data", t.TempDir())
	if code != 2 || !strings.Contains(errOut, `--max-batch="many"`) {
		t.Fatalf("server --max-batch many: exit %d %q", code, errOut)
	}
}
