//go:build linux

package main

import (
	"io"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

func TestParseArgs(t *testing.T) {
	o, names, _, ok := parseArgs([]string{"crash", "--cycles", "7", "--sync", "normal", "--bin", "/x/spool", "--quiet"}, io.Discard)
	if !ok || !reflect.DeepEqual(names, []string{"crash"}) || o.cycles != 7 || o.sync != "normal" || o.bin != "/x/spool" || o.log != nil || o.self == "" {
		t.Fatalf("parsed %+v %v %v", o, names, ok)
	}
	if got := o.pick(o.cycles, 50, 500); got != 7 {
		t.Fatalf("pick with --cycles: %d", got)
	}
	o.cycles, o.long = 0, true
	if got := o.pick(o.cycles, 50, 500); got != 500 {
		t.Fatalf("pick with --long: %d", got)
	}
	o, names, _, ok = parseArgs([]string{"backlog", "--jobs", "200000", "--drain", "5000", "--rounds", "7", "--bin", "/x/spool"}, io.Discard)
	if !ok || !reflect.DeepEqual(names, []string{"backlog"}) || o.jobs != 200000 || o.drain != 5000 || o.rounds != 7 {
		t.Fatalf("backlog: parsed %+v %v %v", o, names, ok)
	}
	_, names, _, ok = parseArgs([]string{"all", "--bin", "/x/spool"}, io.Discard)
	if !ok || len(names) != 7 {
		t.Fatalf("all: %v", names)
	}
	for _, args := range [][]string{nil, {"--long"}, {"bogus"}} {
		if _, _, code, ok := parseArgs(args, io.Discard); ok || code != 2 {
			t.Fatalf("%q: ok %v code %d, want a usage error", args, ok, code)
		}
	}
	if _, _, code, ok := parseArgs([]string{"-h"}, io.Discard); ok || code != 0 {
		t.Fatalf("-h: ok %v code %d", ok, code)
	}
}

func TestRejectsUnknownScenario(t *testing.T) {
	var stderr strings.Builder
	if code := run([]string{"bogus", "--quiet"}, nil, io.Discard, &stderr); code != 2 || !strings.Contains(stderr.String(), `unknown scenario "bogus"`) {
		t.Fatalf("exit %d, stderr %q; want 2 and the unknown scenario", code, stderr.String())
	}
}

func TestWorkerRejectsUnknownMode(t *testing.T) {
	if code := run([]string{"worker", "--mode", "nope"}, nil, io.Discard, io.Discard); code != 2 {
		t.Fatalf("exit %d, want 2", code)
	}
}

func TestFindSpoolNextToItself(t *testing.T) {
	dir := t.TempDir()
	next := filepath.Join(dir, "spool")
	if err := os.WriteFile(next, []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	got, err := findSpool(filepath.Join(dir, "spool-torture"), t.TempDir(), nil)
	if err != nil || got != next {
		t.Fatalf("found %q (%v), want %q", got, err, next)
	}
}

// TestFindSpoolBuildsIt builds the product binary when none is next to
// this one, as under go run.
func TestFindSpoolBuildsIt(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the spool binary")
	}
	scratch := t.TempDir()
	got, err := findSpool(filepath.Join(t.TempDir(), "spool-torture"), scratch, nil)
	if err != nil {
		t.Fatal(err)
	}
	if info, err := os.Stat(got); err != nil || filepath.Dir(got) != scratch || info.Mode()&0o111 == 0 {
		t.Fatalf("built %q: %v", got, err)
	}
}
