package engine

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/spoolq/spool/internal/job"
)

// The registry keeps each worker's first and last sighting, and past its
// bound forgets the worker seen least recently, whatever its name.
func TestWorkerRegistryForgetsTheLeastRecentlySeen(t *testing.T) {
	t.Parallel()
	r := newWorkerRegistry(3)
	at := func(s int) time.Time { return testNow.Add(time.Duration(s) * time.Second) }
	r.seen("c", at(1))
	r.seen("a", at(2))
	r.seen("b", at(3))
	r.seen("c", at(4)) // c is now the most recently seen, a the least
	r.seen("d", at(5))
	got := r.list()
	want := []WorkerInfo{
		{Name: "b", FirstSeen: at(3), LastSeen: at(3)},
		{Name: "c", FirstSeen: at(1), LastSeen: at(4)},
		{Name: "d", FirstSeen: at(5), LastSeen: at(5)},
	}
	if !slices.Equal(got, want) {
		t.Fatalf("registry %+v, want %+v", got, want)
	}
	r.seen("a", at(6))
	if names := namesOf(r.list()); !slices.Equal(names, []string{"a", "c", "d"}) {
		t.Fatalf("after a comes back: %v, want b forgotten", names)
	}
	if w := r.list()[0]; w.FirstSeen != at(6) {
		t.Fatalf("a forgotten worker seen again starts afresh: %+v", w)
	}
}

func namesOf(ws []WorkerInfo) []string {
	out := make([]string, len(ws))
	for i, w := range ws {
		out[i] = w.Name
	}
	return out
}

// The registry holds at most MaxWorkers workers.
func TestWorkerRegistryIsBounded(t *testing.T) {
	t.Parallel()
	r := newWorkerRegistry(MaxWorkers)
	for i := range MaxWorkers + 10 {
		r.seen(fmt.Sprintf("w%05d", i), testNow)
	}
	got := r.list()
	if len(got) != MaxWorkers || got[0].Name != "w00010" {
		t.Fatalf("%d workers from %s, want %d from w00010", len(got), got[0].Name, MaxWorkers)
	}
}

// Workers lists the workers that fetched, with what each holds; a fetch
// without a name is no worker. A listing by worker shows what one holds,
// and is refused for any other state.
func TestWorkersAndTheirJobs(t *testing.T) {
	t.Parallel()
	b := setupGroupFetch(t)
	for range 3 {
		b.enqueue("q", "")
	}
	fetch := func(worker string, max int) []*job.Job {
		t.Helper()
		jobs, err := b.e.Fetch(b.ctx, FetchRequest{Queues: []string{"q"}, Max: max, Worker: worker})
		if err != nil {
			t.Fatal(err)
		}
		return jobs
	}
	fetch("zed", 2)
	fetch("", 1)
	fetch("amy", 1) // nothing left for her
	ws, err := b.e.Workers(b.ctx)
	if err != nil {
		t.Fatal(err)
	}
	if names := namesOf(ws); !slices.Equal(names, []string{"amy", "zed"}) || ws[0].Active != 0 || ws[1].Active != 2 ||
		ws[1].FirstSeen.IsZero() || ws[1].LastSeen.Before(ws[1].FirstSeen) {
		t.Fatalf("workers %+v", ws)
	}
	page, err := b.e.List(b.ctx, job.ListParams{State: job.StateActive, Worker: "zed"})
	if err != nil || len(page.Jobs) != 2 || page.Jobs[0].Worker != "zed" {
		t.Fatalf("the jobs of zed: %+v, %v", page, err)
	}
	// A name of bytes that are not UTF-8 is listed cleaned, three times
	// as long, and its jobs are found by that name.
	b.enqueue("q", "")
	fetch(strings.Repeat("\xff", MaxWorkerBytes), 1)
	if ws, err = b.e.Workers(b.ctx); err != nil {
		t.Fatal(err)
	}
	cleaned := ws[len(ws)-1].Name
	if page, err := b.e.List(b.ctx, job.ListParams{State: job.StateActive, Worker: cleaned}); err != nil || len(page.Jobs) != 1 {
		t.Fatalf("the jobs of a worker listed by its cleaned %d-byte name: %+v, %v", len(cleaned), page, err)
	}
	for _, p := range []job.ListParams{
		{State: job.StateCompleted, Worker: "zed"},
		{Worker: "zed"},
		{State: job.StateActive, Worker: strings.Repeat("w", MaxWorkerBytes+1)},
	} {
		_, err := b.e.List(b.ctx, p)
		var in *job.InputError
		if !errors.As(err, &in) || in.Field != "worker" {
			t.Errorf("list %+v: %v, want an input error naming worker", p, err)
		}
	}
}
