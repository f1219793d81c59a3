package main

import (
	"bytes"
	"encoding/json"
	"io"
	"os"
	"strings"
	"testing"

	"github.com/spoolq/spool/internal/bench"
)

// asSpoolEnv makes the test binary behave as the spool binary, so that
// `spool bench` can re-execute it as its embedded server exactly as the
// real binary re-executes itself. It must not start with SPOOL_, which
// the embedded server's environment leaves out.
const asSpoolEnv = "BENCH_TEST_AS_SPOOL"

func TestMain(m *testing.M) {
	if os.Getenv(asSpoolEnv) == "1" {
		os.Exit(run(os.Args[1:]))
	}
	os.Exit(m.Run())
}

// TestBenchCLI runs `spool bench` through the real CLI path: flags, the
// embedded server as a re-executed child process, JSON output.
func TestBenchCLI(t *testing.T) {
	t.Setenv(asSpoolEnv, "1")
	var out, errOut bytes.Buffer
	code := benchMain(t, []string{"--mode", "process", "--jobs", "300", "--workers", "2", "--concurrency", "20",
		"--partitions", "2", "--sync", "normal", "--json", "--quiet", "--timeout", "1m"}, &out, &errOut)
	if code != 0 {
		t.Fatalf("exit %d: %s%s", code, out.String(), errOut.String())
	}
	var res bench.Result
	if err := json.Unmarshal(out.Bytes(), &res); err != nil {
		t.Fatalf("decode %q: %v", out.String(), err)
	}
	if res.Processed != 300 || res.Verification == nil || !res.Verification.OK || res.Settings.Queues != 2 || res.Sync != "normal" {
		t.Fatalf("result %+v", res)
	}
	if res.ServerCPUPercent == nil || res.ServerPeakRSSMB == nil || res.ClientCPUPercent == nil {
		t.Fatalf("resource figures missing: %s", out.String())
	}
}

// benchMain runs `spool bench` with args, writing to stdout and stderr,
// and returns its exit code.
func benchMain(t *testing.T, args []string, stdout, stderr io.Writer) int {
	t.Helper()
	c := &cli{in: strings.NewReader(""), out: stdout, errOut: stderr, getenv: os.Getenv}
	return c.run(append([]string{"bench"}, args...))
}

func TestBenchCLIBadFlags(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"--preset", "seeds", "--jobs", "5"}, 2, "--jobs cannot be combined with --preset"},
		{[]string{"--mode", "nope"}, 1, `unknown mode "nope"`},
		{[]string{"--mode", "enqueue", "--transport", "grpc"}, 1, `transport "grpc": want http or stream`},
		{[]string{"--preset", "seeds", "--transport", "stream"}, 2, "--transport cannot be combined with --preset"},
		{[]string{"--mode", "enqueue", "--batch", "10"}, 1, "use enqueue-batch"},
		{[]string{"--mode", "process", "--duration", "1s"}, 1, "duration does not apply to process mode"},
		{[]string{"--mode", "enqueue", "--server-pid", "1"}, 1, "a server pid needs a server URL"},
		{[]string{"--preset", "other"}, 1, `unknown preset "other"`},
		{[]string{"extra"}, 2, "unexpected argument"},
	} {
		var out, errOut bytes.Buffer
		code := benchMain(t, tc.args, &out, &errOut)
		if code != tc.code || !strings.Contains(errOut.String(), tc.want) {
			t.Errorf("spool bench %s: exit %d, stderr %q; want exit %d and %q", strings.Join(tc.args, " "), code, errOut.String(), tc.code, tc.want)
		}
	}
}
