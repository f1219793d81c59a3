//go:build linux

package main

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
)

// spoolPackage is the product binary's package, built when no spool
// binary is at hand.
const spoolPackage = "github.com/spoolq/spool/cmd/spool"

// findSpool returns the spool binary to run as the server under test: the
// one in the folder of this binary (self), where `go build -o DIR ./cmd/...`
// and `go install` put both; else one built with `go build` into dir,
// which works from within the module, as `go run ./cmd/spool-torture`
// does. A binary next to this one is taken as it is, so it should be
// built from the same source.
func findSpool(self, dir string, log io.Writer) (string, error) {
	next := filepath.Join(filepath.Dir(self), "spool")
	if info, err := os.Stat(next); err == nil && info.Mode().IsRegular() {
		return next, nil
	}
	out := filepath.Join(dir, "spool")
	if log != nil {
		fmt.Fprintf(log, "spool-torture: no spool binary next to %s; building %s into %s\n", self, spoolPackage, out)
	}
	var msg bytes.Buffer
	build := exec.Command("go", "build", "-o", out, spoolPackage)
	build.Stdout, build.Stderr = &msg, &msg
	if err := build.Run(); err != nil {
		return "", fmt.Errorf("no spool binary next to %s, and go build %s failed (%w): %s; name one with --bin",
			self, spoolPackage, err, bytes.TrimSpace(msg.Bytes()))
	}
	return out, nil
}
