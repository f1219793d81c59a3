package events

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/spoolq/spool/internal/job"
)

func evs(n int, queue string) []Event {
	out := make([]Event, n)
	for i := range out {
		out[i] = Of(Completed, time.Unix(0, 0), fmt.Sprintf("j%d", i), queue)
	}
	return out
}

// drain reads r until it has looked at every event published and returns
// what passed, failing on an error.
func drain(t *testing.T, r *Reader) []Event {
	t.Helper()
	var out []Event
	buf := make([]Event, 0, 64)
	for {
		got, wait, err := r.Read(buf, 1<<20)
		if err != nil {
			t.Fatalf("read: %v", err)
		}
		out = append(out, got...)
		if wait != nil {
			return out
		}
	}
}

func seqs(evs []Event) []uint64 {
	out := make([]uint64, len(evs))
	for i := range evs {
		out[i] = evs[i].ID.Seq
	}
	return out
}

// A reader gets what passes its filter, numbered in publish order.
func TestReadersGetTheirEventsInOrder(t *testing.T) {
	t.Parallel()
	b := NewBus(Options{Size: 100})
	all, _ := b.Follow(Filter{}, false, ID{})
	onlyA, _ := b.Follow(Filter{Queues: []string{"a"}}, false, ID{})
	b.Publish(evs(3, "a"))
	b.Publish(evs(2, "b@g1")) // a consumer group's lane: queue b
	got := drain(t, all)
	if fmt.Sprint(seqs(got)) != "[1 2 3 4 5]" || got[0].ID.Bus != b.Epoch() {
		t.Fatalf("ids %v of bus %x", got, b.Epoch())
	}
	if got[3].Queue != "b" || got[3].ConsumerGroup != "g1" {
		t.Fatalf("a lane's event: queue %q group %q", got[3].Queue, got[3].ConsumerGroup)
	}
	if n := len(drain(t, onlyA)); n != 3 {
		t.Fatalf("queue a's reader got %d events, want 3", n)
	}
	if p := all.Position(); p != (ID{Bus: b.Epoch(), Seq: 5}) || b.Last() != p {
		t.Fatalf("position %v, last %v", p, b.Last())
	}
}

// A reader that resumes gets the kept events after its last, and is told
// when some were no longer kept.
func TestResumeFromTheRing(t *testing.T) {
	t.Parallel()
	b := NewBus(Options{Size: 10})
	b.Publish(evs(25, "q"))
	at := func(seq uint64) ID { return ID{Bus: b.Epoch(), Seq: seq} }
	r, gap := b.Follow(Filter{}, true, at(20))
	if got := drain(t, r); gap || fmt.Sprint(seqs(got)) != "[21 22 23 24 25]" {
		t.Fatalf("resume after 20: gap %v, %v", gap, seqs(got))
	}
	r, gap = b.Follow(Filter{}, true, at(3))
	if got := drain(t, r); !gap || len(got) != 10 || got[0].ID.Seq != 16 {
		t.Fatalf("resume after 3 with 10 kept: gap %v, %v", gap, seqs(got))
	}
	r, gap = b.Follow(Filter{}, true, at(25))
	if got := drain(t, r); gap || len(got) != 0 {
		t.Fatalf("resume after the last: gap %v, %v", gap, seqs(got))
	}
	r, gap = b.Follow(Filter{}, true, ID{})
	if got := drain(t, r); !gap || got[0].ID.Seq != 16 {
		t.Fatalf("resume from the start once the ring turned: gap %v, %v", gap, seqs(got))
	}
	fresh := NewBus(Options{Size: 10})
	fresh.Publish(evs(3, "q"))
	r, gap = fresh.Follow(Filter{}, true, ID{})
	if got := drain(t, r); gap || len(got) != 3 {
		t.Fatalf("resume from the start of a ring that kept everything: gap %v, %v", gap, seqs(got))
	}
}

// Publishing does no work per reader: with a thousand readers it runs no
// filter and allocates no more than with none, and each reader then
// finds every event in the ring.
// (Not parallel: testing.AllocsPerRun needs the process to itself.)
func TestPublishDoesNoWorkPerReader(t *testing.T) {
	publishCost := func(readers int) (filtered int64, allocs float64, all []*Reader) {
		b := NewBus(Options{Size: 1 << 10})
		var n atomic.Int64
		f := Filter{Allow: func(string) bool { n.Add(1); return true }}
		for range readers {
			r, _ := b.Follow(f, false, ID{})
			all = append(all, r)
		}
		batch := evs(100, "q")
		b.Publish(batch)
		filtered = n.Load()
		allocs = testing.AllocsPerRun(100, func() { b.Publish(batch[:1]) })
		return filtered, allocs, all
	}
	_, alone, _ := publishCost(0)
	filtered, crowded, readers := publishCost(1000)
	if filtered != 0 {
		t.Fatalf("publishing 100 events to 1,000 idle readers ran their filters %d times", filtered)
	}
	if crowded != alone {
		t.Fatalf("a publish allocates %v times with 1,000 readers, %v with none", crowded, alone)
	}
	for _, r := range readers[:10] {
		if got := drain(t, r); len(got) != 201 || got[0].Job != "j0" || got[99].Job != "j99" {
			t.Fatalf("a reader found %d events after the publishes, want 201", len(got))
		}
	}
}

// Readers that keep up lose nothing and see everything in order, while a
// publisher goes on in batches of every size.
func TestReadersThatKeepUpGetEveryEventInOrder(t *testing.T) {
	t.Parallel()
	const total = 10_000
	b := NewBus(Options{Size: total})
	filters := []Filter{{}, {Queues: []string{"odd"}}, {Types: []Type{Completed}}}
	var wg sync.WaitGroup
	got := make([][]Event, len(filters))
	for i, f := range filters {
		r, _ := b.Follow(f, false, ID{})
		wg.Go(func() {
			buf := make([]Event, 0, 32)
			timeout := time.After(30 * time.Second)
			for {
				evs, wait, err := r.Read(buf, 1<<20)
				if err != nil {
					t.Errorf("reader %d: %v", i, err)
					return
				}
				got[i] = append(got[i], evs...)
				if r.Position().Seq == total {
					return
				}
				if wait != nil {
					select {
					case <-wait:
					case <-timeout:
						t.Errorf("reader %d was not woken: at %v", i, r.Position())
						return
					}
				}
			}
		})
	}
	for sent, size := 0, 1; sent < total; size = size%97 + 1 {
		batch := make([]Event, min(size, total-sent))
		for i := range batch {
			q := "even"
			if (sent+i)%2 == 1 {
				q = "odd"
			}
			batch[i] = Of(Completed, time.Time{}, fmt.Sprint(sent+i), q)
		}
		b.Publish(batch)
		sent += len(batch)
	}
	wg.Wait()
	for i, want := range []int{total, total / 2, total} {
		if len(got[i]) != want {
			t.Fatalf("reader %d got %d events, want %d", i, len(got[i]), want)
		}
		for k := range got[i] {
			if k > 0 && got[i][k].ID.Seq <= got[i][k-1].ID.Seq {
				t.Fatalf("reader %d: event %d out of order", i, k)
			}
			if job := fmt.Sprint(got[i][k].ID.Seq - 1); got[i][k].Job != job {
				t.Fatalf("reader %d: event %v carries job %s", i, got[i][k].ID, got[i][k].Job)
			}
		}
	}
}

// A reader the ring overtook is told so once, and goes on from the oldest
// event kept; the publisher never waited for it.
func TestASlowReaderIsToldItFellBehind(t *testing.T) {
	t.Parallel()
	b := NewBus(Options{Size: 10})
	slow, _ := b.Follow(Filter{}, false, ID{})
	fast, _ := b.Follow(Filter{}, false, ID{})
	b.Publish(evs(5, "q"))
	if got := drain(t, fast); len(got) != 5 {
		t.Fatalf("fast reader: %d events", len(got))
	}
	b.Publish(evs(20, "q"))
	if _, _, err := slow.Read(make([]Event, 0, 4), 1<<20); !errors.Is(err, ErrBehind) {
		t.Fatalf("a reader 25 events behind a ring of 10: %v, want ErrBehind", err)
	}
	if got := drain(t, slow); fmt.Sprint(seqs(got)) != "[16 17 18 19 20 21 22 23 24 25]" {
		t.Fatalf("after falling behind: %v", seqs(got))
	}
	if _, _, err := fast.Read(make([]Event, 0, 4), 1<<20); !errors.Is(err, ErrBehind) {
		t.Fatalf("the fast reader 20 behind: %v", err)
	}
}

// A reader resuming over a long backlog copies it a bounded chunk at a
// time, into its own buffer, and gets all of it in order.
func TestResumeReadsABacklogInBoundedChunks(t *testing.T) {
	t.Parallel()
	const n = 10_000
	b := NewBus(Options{Size: n})
	batch := evs(n, "q")
	for i := range batch {
		if i%10 == 0 {
			batch[i].Error = strings.Repeat("x", MaxErrorBytes)
		}
	}
	b.Publish(batch)
	r, gap := b.Follow(Filter{}, true, ID{})
	if gap {
		t.Fatal("a ring that kept every event reported a gap")
	}
	buf := make([]Event, 0, 16)
	const budget = 2 * MaxErrorBytes
	var next uint64 = 1
	for calls := 0; ; calls++ {
		got, wait, err := r.Read(buf, budget)
		if err != nil {
			t.Fatal(err)
		}
		if len(got) > cap(buf) || (len(got) > 0 && &got[0] != &buf[:1][0]) {
			t.Fatalf("a read returned %d events outside the reader's buffer of %d", len(got), cap(buf))
		}
		size := 0
		for i := range got {
			if got[i].ID.Seq != next {
				t.Fatalf("event %d, want %d", got[i].ID.Seq, next)
			}
			next++
			size += eventBytes(&got[i])
		}
		if len(got) > 1 && size > budget {
			t.Fatalf("a read copied %d bytes of events, over its budget of %d", size, budget)
		}
		if wait != nil {
			break
		}
		if calls > 2*n {
			t.Fatal("the reader does not advance")
		}
	}
	if next != n+1 {
		t.Fatalf("read up to %d of %d", next-1, n)
	}
}

// The ring holds at most its bytes: errors are cut, and the oldest events
// go first when long ones fill it.
func TestTheRingIsBoundedInBytes(t *testing.T) {
	t.Parallel()
	const bound = 1 << 20
	b := NewBus(Options{Size: 1 << 14, Bytes: bound})
	long := "x" + strings.Repeat("é", 32<<10) // 64 KiB, two bytes a character past the first
	for i := range 2048 {
		ev := Of(Dead, time.Time{}, fmt.Sprint(i), "q")
		ev.Error = long
		b.Publish([]Event{ev})
	}
	b.mu.RLock()
	held, oldest, last := b.bytes, b.oldest, b.last
	b.mu.RUnlock()
	if held > bound || last != 2048 || oldest == 1 {
		t.Fatalf("ring holds %d bytes (bound %d), events %d to %d", held, bound, oldest, last)
	}
	r, gap := b.Follow(Filter{}, true, ID{})
	got := drain(t, r)
	sum := 0
	for i := range got {
		e := got[i].Error
		if len(e) > MaxErrorBytes || len(e) < MaxErrorBytes-1 || !utf8.ValidString(e) || !strings.HasPrefix(long, e) {
			t.Fatalf("kept error of %d bytes (valid %v), want the first %d at most", len(e), utf8.ValidString(e), MaxErrorBytes)
		}
		sum += eventBytes(&got[i])
	}
	if !gap || sum != held || got[len(got)-1].Job != "2047" || uint64(len(got)) != last-oldest+1 {
		t.Fatalf("resume from the start: gap %v, %d events of %d bytes (ring %d)", gap, len(got), sum, held)
	}
}

// An ID of another bus (an earlier run, another node) is not this bus's:
// a reader resuming with one is told of a gap and gets what the ring
// keeps; an ID of this bus resumes after it.
func TestAnotherBussIDIsAGap(t *testing.T) {
	t.Parallel()
	a, b := NewBus(Options{Size: 100}), NewBus(Options{Size: 100})
	if a.Epoch() == b.Epoch() {
		t.Fatal("two buses share an epoch")
	}
	a.Publish(evs(50, "q"))
	b.Publish(evs(3, "q"))
	for _, after := range []ID{a.Last(), {Seq: 2}, {Bus: a.Epoch(), Seq: 1}} {
		r, gap := b.Follow(Filter{}, true, after)
		if got := drain(t, r); !gap || fmt.Sprint(seqs(got)) != "[1 2 3]" {
			t.Fatalf("resume on b after %v: gap %v, %v", after, gap, seqs(got))
		}
	}
	r, gap := b.Follow(Filter{}, true, ID{Bus: b.Epoch(), Seq: 1})
	if got := drain(t, r); gap || fmt.Sprint(seqs(got)) != "[2 3]" {
		t.Fatalf("resume on b after its own 1: gap %v, %v", gap, seqs(got))
	}
}

// An ID's text reads back as the ID; a bare number is an ID of no bus.
func TestIDText(t *testing.T) {
	t.Parallel()
	for _, id := range []ID{{Bus: 1, Seq: 1}, {Bus: 0xfedcba9876543210, Seq: 1 << 62}, {Bus: 42}} {
		text := id.String()
		back, err := ParseID(text)
		if err != nil || back != id {
			t.Fatalf("%#v as %q reads back as %#v, %v", id, text, back, err)
		}
	}
	if s := (ID{Bus: 0x7f3a9c0d12e4b7a8, Seq: 1042}).String(); s != "7f3a9c0d12e4b7a8-1042" {
		t.Fatalf("text %q", s)
	}
	for text, want := range map[string]ID{"0": {}, "50": {Seq: 50}} {
		if id, err := ParseID(text); err != nil || id != want {
			t.Fatalf("%q: %#v %v", text, id, err)
		}
	}
	for _, bad := range []string{"", "-1", "+1", "x", "1.5", "7f3a9c0d12e4b7a8", "7f3a9c0d12e4b7a8-", "7F3A9C0D12E4B7A8-1",
		"7f3a9c0d12e4b7a-1", "0000000000000000-1", "7f3a9c0d12e4b7a8-1-2", "7f3a9c0d12e4b7a8- 1", "18446744073709551616",
		strings.Repeat("1", 65)} {
		if id, err := ParseID(bad); err == nil {
			t.Errorf("%q read as %#v", bad, id)
		}
	}
}

// Watches of one job get that job's events only; one whose buffer is full
// is dropped; a closed bus ends every watch and reader.
func TestJobWatchesAndClose(t *testing.T) {
	t.Parallel()
	b := NewBus(Options{Size: 100})
	w := b.WatchJob("j7", 10)
	full := b.WatchJob("j7", 1)
	r, _ := b.Follow(Filter{}, false, ID{})
	b.Publish(evs(10, "q"))
	if e := <-w.C(); e.Job != "j7" || e.ID.Seq != 8 || len(w.C()) != 0 {
		t.Fatalf("job watch got %v and %d more", e, len(w.C()))
	}
	b.Publish(evs(10, "q"))
	if _, ok := <-full.C(); !ok {
		t.Fatal("the full watch lost its first event")
	}
	if _, ok := <-full.C(); ok {
		t.Fatal("a watch with a full buffer was not dropped")
	}
	if !Completed.Final() || Started.Final() || Failed.Final() {
		t.Fatal("final types")
	}
	_, wait, err := r.Read(make([]Event, 0, 64), 1<<20)
	if err != nil || wait == nil {
		t.Fatalf("read: %v", err)
	}
	b.Close()
	select {
	case <-wait:
	case <-time.After(10 * time.Second):
		t.Fatal("closing the bus did not wake a waiting reader")
	}
	if _, _, err := r.Read(make([]Event, 0, 1), 1<<20); !errors.Is(err, ErrClosed) {
		t.Fatalf("read of a closed bus: %v", err)
	}
	if e := <-w.C(); e.ID.Seq != 18 {
		t.Fatalf("second event of j7: %v", e)
	}
	if _, ok := <-w.C(); ok {
		t.Fatal("a closed bus left a watch open")
	}
	w.Close() // idempotent
	b.Close()
	if _, ok := <-b.WatchJob("j1", 1).C(); ok {
		t.Fatal("a closed bus took a watch")
	}
	late, _ := b.Follow(Filter{}, false, ID{})
	if _, _, err := late.Read(make([]Event, 0, 1), 1<<20); !errors.Is(err, ErrClosed) {
		t.Fatalf("a reader of a closed bus: %v", err)
	}
}

func TestFilterByKindAndNamespace(t *testing.T) {
	t.Parallel()
	f := Filter{Kinds: []string{"email"}, Allow: func(q string) bool { return q == "team-a" }}
	for _, c := range []struct {
		e    Event
		want bool
	}{
		{Event{Queue: "team-a", Kind: "email"}, true},
		{Event{Queue: "team-a", Kind: "sms"}, false},
		{Event{Queue: "team-a"}, true}, // kind unknown to the engine
		{Event{Queue: "team-b", Kind: "email"}, false},
		{Event{Queue: "team-a", Kind: "email", State: job.StateDead}, true},
	} {
		if got := f.Passes(&c.e); got != c.want {
			t.Errorf("%+v: passes %v, want %v", c.e, got, c.want)
		}
	}
}

func TestFilterByType(t *testing.T) {
	t.Parallel()
	b := NewBus(Options{Size: 16})
	r, _ := b.Follow(Filter{Types: []Type{Completed, Dead}}, false, ID{})
	for _, typ := range []Type{Enqueued, Started, Completed, Failed, Dead} {
		b.Publish([]Event{Of(typ, time.Now(), "j", "q")})
	}
	var got []Type
	for _, e := range drain(t, r) {
		got = append(got, e.Type)
	}
	if !slices.Equal(got, []Type{Completed, Dead}) {
		t.Fatalf("got %v, want [job.completed job.dead]", got)
	}
}
