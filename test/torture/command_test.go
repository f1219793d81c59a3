//go:build linux

package torture_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os/exec"
	"testing"
	"time"
)

// TestCommand runs a scenario through the spool-torture command as
// docs/reliability.md does: it finds the spool binary next to itself, runs
// itself as the worker processes, prints one JSON summary and exits 0 when
// the run passed; an unknown scenario exits 2.
func TestCommand(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var stdout, stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, harness, "worker-fault", "--quiet")
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("spool-torture worker-fault: %v\n%s%s", err, stdout.String(), stderr.String())
	}
	var summary struct {
		Scenario string `json:"scenario"`
		Pass     bool   `json:"pass"`
	}
	if err := json.Unmarshal(stdout.Bytes(), &summary); err != nil || summary.Scenario != "worker-fault" || !summary.Pass {
		t.Fatalf("summary %+v (%v) from %q", summary, err, stdout.String())
	}

	err := exec.CommandContext(ctx, harness, "bogus").Run()
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() != 2 {
		t.Fatalf("spool-torture bogus: %v, want exit status 2", err)
	}
}
