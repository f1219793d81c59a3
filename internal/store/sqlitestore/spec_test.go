package sqlitestore

import (
	"context"
	"database/sql"
	"errors"
	"math"
	"path/filepath"
	"reflect"
	"testing"
	"time"

	"github.com/spoolq/spool/internal/job"
)

func specJob(s *spec) *job.Job {
	return &job.Job{
		Kind: s.kind, MaxAttempts: s.maxAttempts, Backoff: s.backoff, LeaseDuration: s.leaseFor,
		UniqueFor: s.uniqueFor, CreatedAt: fromNanos(s.createdAt), Durability: s.durability, Tags: s.tags,
		DeadLetterOf: s.deadLetterOf, TraceParent: s.traceParent,
	}
}

// Every field of a spec comes back as it went in, extremes included.
func TestSpecRoundTrip(t *testing.T) {
	t.Parallel()
	for _, s := range []spec{
		{kind: "send_email", maxAttempts: 25, backoff: job.Backoff{Kind: job.BackoffExponential, Base: time.Second,
			Max: time.Hour, Jitter: 0.1}, leaseFor: 30 * time.Second, createdAt: time.Date(2026, 11, 23, 8, 0, 0, 1, time.UTC).UnixNano(),
			durability: job.DurabilityFull},
		{kind: "k", maxAttempts: 1, backoff: job.Backoff{Kind: job.BackoffFixed}, uniqueFor: time.Minute,
			durability: job.DurabilityProcess, tags: []string{"a", "ünïcode", ""}},
		{kind: string(make([]byte, 300)), maxAttempts: math.MaxInt32, backoff: job.Backoff{Base: math.MaxInt64,
			Max: math.MinInt64, Jitter: math.Inf(1)}, leaseFor: -1, createdAt: math.MinInt64, tags: []string{}},
		{kind: "k", maxAttempts: 2, durability: job.DurabilityMemory, tags: []string{"t"},
			deadLetterOf: job.JobRef{Queue: "orders", ID: "01JD3Y6Q4H2V8M5N7P9R0S1T2V"}},
		{kind: "k", maxAttempts: 2, durability: job.DurabilityFull,
			traceParent: "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"},
		{kind: "k", maxAttempts: 2, durability: job.DurabilityProcess, tags: []string{"t"},
			deadLetterOf: job.JobRef{Queue: "orders", ID: "01JD3Y6Q4H2V8M5N7P9R0S1T2V"},
			traceParent:  "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00"},
	} {
		var got job.Job
		if err := decodeSpec(appendSpec(nil, &s), &got); err != nil {
			t.Fatalf("decode %+v: %v", s, err)
		}
		want := specJob(&s)
		if len(want.Tags) == 0 {
			want.Tags = nil
		}
		if !reflect.DeepEqual(&got, want) {
			t.Fatalf("round trip:\n got %+v\nwant %+v", got, *want)
		}
	}
}

// A spec cut short, with bytes to spare, or of another version is an
// error, never a panic or a half-read job taken as whole.
func TestSpecMalformed(t *testing.T) {
	t.Parallel()
	whole := appendSpec(nil, &spec{kind: "k", maxAttempts: 3, durability: job.DurabilityFull, tags: []string{"x", "y"}})
	for n := 0; n < len(whole); n++ {
		var j job.Job
		if err := decodeSpec(whole[:n], &j); !errors.Is(err, errBadSpec) {
			t.Fatalf("spec cut to %d of %d bytes: err %v, want errBadSpec", n, len(whole), err)
		}
	}
	var j job.Job
	if err := decodeSpec(append(append([]byte(nil), whole...), 0), &j); !errors.Is(err, errBadSpec) {
		t.Fatalf("spec with a byte to spare: err %v", err)
	}
	other := append([]byte{specVersionTrace + 1}, whole[1:]...)
	if err := decodeSpec(other, &j); !errors.Is(err, errBadSpec) {
		t.Fatalf("spec of version %d: err %v", specVersionTrace+1, err)
	}
	// A traced job's spec without its traceparent is cut short.
	traced := append([]byte{specVersionTrace}, appendSpec(nil, &spec{kind: "k", maxAttempts: 3,
		deadLetterOf: job.JobRef{Queue: "q", ID: "i"}})[1:]...)
	if err := decodeSpec(traced, &j); !errors.Is(err, errBadSpec) {
		t.Fatalf("spec of version %d without its traceparent: err %v", specVersionTrace, err)
	}
	// A dead-letter copy's spec without the dead job it names is cut short.
	letter := append([]byte{specVersionLetter}, whole[1:]...)
	if err := decodeSpec(letter, &j); !errors.Is(err, errBadSpec) {
		t.Fatalf("spec of version %d without its dead job: err %v", specVersionLetter, err)
	}
	if err := decodeSpec(append([]byte{specVersion, 0, 0, 0, 0, 0}, make([]byte, 8)...), &j); !errors.Is(err, errBadSpec) {
		t.Fatalf("spec without its tail: err %v", err)
	}
}

// FuzzDecodeSpec checks that no input makes decodeSpec panic, and that
// whatever it accepts encodes back to the same bytes.
func FuzzDecodeSpec(f *testing.F) {
	f.Add(appendSpec(nil, &spec{kind: "k", maxAttempts: 3, durability: job.DurabilityFull, tags: []string{"x"}}))
	f.Add([]byte{specVersion})
	f.Add(appendSpec(nil, &spec{kind: "k", maxAttempts: 3, durability: job.DurabilityFull, deadLetterOf: job.JobRef{Queue: "q", ID: "i"}}))
	f.Add([]byte{specVersion, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01})
	f.Fuzz(func(t *testing.T, data []byte) {
		var j job.Job
		if decodeSpec(data, &j) != nil {
			return
		}
		s := spec{kind: j.Kind, maxAttempts: j.MaxAttempts, backoff: j.Backoff, leaseFor: j.LeaseDuration,
			uniqueFor: j.UniqueFor, createdAt: j.CreatedAt.UnixNano(), durability: j.Durability, tags: j.Tags,
			deadLetterOf: j.DeadLetterOf}
		var again job.Job
		if err := decodeSpec(appendSpec(nil, &s), &again); err != nil || !reflect.DeepEqual(&again, &j) {
			t.Fatalf("accepted %x as %+v; re-encoded it reads %+v (%v)", data, j, again, err)
		}
	})
}

// A database written before the spec column opens with every job's fields
// intact, read from the spec its migration filled.
func TestMigrationFillsSpecs(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	ctx := context.Background()
	db, err := sql.Open("sqlite3", dsn(filepath.Join(dir, "spool.db"), "normal", false))
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range migrations[:2] {
		if _, err := db.Exec(m.sql); err != nil {
			t.Fatalf("old schema: %v", err)
		}
	}
	created := time.Date(2026, 11, 1, 12, 0, 0, 5, time.UTC)
	if _, err := db.Exec(`PRAGMA user_version = 2`); err != nil {
		t.Fatal(err)
	}
	const legacy = `INSERT INTO jobs (seq, id, queue, kind, payload, priority, state, run_at, max_attempts, backoff_kind,
	backoff_base, backoff_max, backoff_jitter, lease_ns, unique_key, unique_for, tags, created_at, durability)
	VALUES (?, ?, 'q', ?, '{}', 0, 'available', ?, ?, 'exponential', ?, ?, 0.25, ?, NULL, ?, ?, ?, ?)`
	for i := 1; i <= 2500; i++ { // more than one chunk of the migration
		tags := any(nil)
		if i%2 == 0 {
			tags = `["a","b"]`
		}
		if _, err := db.Exec(legacy, i, job.NewID(created)+string(rune('a'+i%26)), "kind"+string(rune('a'+i%26)),
			created.UnixNano(), i%7+1, int64(i)*int64(time.Millisecond), int64(time.Hour), int64(30*time.Second),
			int64(i)*int64(time.Second), tags, created.UnixNano()+int64(i), "process"); err != nil {
			t.Fatalf("legacy row %d: %v", i, err)
		}
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	b := &bundle{t: t, dir: dir, ctx: ctx}
	b.open()
	t.Cleanup(func() { _ = b.s.Close() })
	var ids []string
	rows, err := b.s.rdb.Query(`SELECT id FROM jobs ORDER BY seq`)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			t.Fatal(err)
		}
		ids = append(ids, id)
	}
	if err := closeRows(rows); err != nil || len(ids) != 2500 {
		t.Fatalf("%d jobs after the migration (%v), want 2500", len(ids), err)
	}
	for i, id := range ids {
		n := i + 1
		j := b.get(id)
		want := job.Job{
			Kind: "kind" + string(rune('a'+n%26)), MaxAttempts: n%7 + 1, LeaseDuration: 30 * time.Second,
			Backoff:   job.Backoff{Kind: job.BackoffExponential, Base: time.Duration(n) * time.Millisecond, Max: time.Hour, Jitter: 0.25},
			UniqueFor: time.Duration(n) * time.Second, CreatedAt: time.Unix(0, created.UnixNano()+int64(n)).UTC(),
			Durability: job.DurabilityProcess,
		}
		if n%2 == 0 {
			want.Tags = []string{"a", "b"}
		}
		got := job.Job{Kind: j.Kind, MaxAttempts: j.MaxAttempts, LeaseDuration: j.LeaseDuration, Backoff: j.Backoff,
			UniqueFor: j.UniqueFor, CreatedAt: j.CreatedAt, Durability: j.Durability, Tags: j.Tags}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("job %d after the migration:\n got %+v\nwant %+v", n, got, want)
		}
	}
}
