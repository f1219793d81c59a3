//go:build linux

package main

import (
	"io"
	"reflect"
	"testing"
)

func TestParseTorture(t *testing.T) {
	o, names, _, ok := parseTorture([]string{"crash", "--cycles", "7", "--sync", "normal", "--bin", "/x/spool", "--quiet"}, io.Discard)
	if !ok || !reflect.DeepEqual(names, []string{"crash"}) || o.cycles != 7 || o.sync != "normal" || o.bin != "/x/spool" || o.log != nil {
		t.Fatalf("parsed %+v %v %v", o, names, ok)
	}
	if got := o.pick(o.cycles, 50, 500); got != 7 {
		t.Fatalf("pick with --cycles: %d", got)
	}
	o.cycles, o.long = 0, true
	if got := o.pick(o.cycles, 50, 500); got != 500 {
		t.Fatalf("pick with --long: %d", got)
	}
	o, names, _, ok = parseTorture([]string{"backlog", "--jobs", "200000", "--drain", "5000", "--rounds", "7", "--bin", "/x/spool"}, io.Discard)
	if !ok || !reflect.DeepEqual(names, []string{"backlog"}) || o.jobs != 200000 || o.drain != 5000 || o.rounds != 7 {
		t.Fatalf("backlog: parsed %+v %v %v", o, names, ok)
	}
	_, names, _, ok = parseTorture([]string{"all", "--bin", "/x/spool"}, io.Discard)
	if !ok || len(names) != 7 {
		t.Fatalf("all: %v", names)
	}
	for _, args := range [][]string{nil, {"--long"}} {
		if _, _, code, ok := parseTorture(args, io.Discard); ok || code != 2 {
			t.Fatalf("%q: ok %v code %d, want a usage error", args, ok, code)
		}
	}
	if _, _, code, ok := parseTorture([]string{"-h"}, io.Discard); ok || code != 0 {
		t.Fatalf("-h: ok %v code %d", ok, code)
	}
}

func TestTortureRejectsUnknownScenario(t *testing.T) {
	if code := tortureMain([]string{"bogus", "--bin", "/x/spool", "--quiet"}, nil, io.Discard, io.Discard); code != 2 {
		t.Fatalf("exit %d, want 2", code)
	}
}
