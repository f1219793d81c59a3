package wire

import (
	"encoding/json"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/spoolq/spool/internal/events"
	"github.com/spoolq/spool/internal/job"
)

// reference is the wire form of a job as the protocol describes it,
// encoded by encoding/json: the hand-written encoder must say the same.
type reference struct {
	ID              string             `json:"id"`
	Queue           string             `json:"queue"`
	Kind            string             `json:"kind"`
	Payload         json.RawMessage    `json:"payload"`
	Priority        int                `json:"priority"`
	State           job.State          `json:"state"`
	RunAt           time.Time          `json:"run_at"`
	Attempt         int                `json:"attempt"`
	MaxAttempts     int                `json:"max_attempts"`
	Backoff         map[string]any     `json:"backoff"`
	LeaseMS         int64              `json:"lease_ms"`
	Durability      job.Durability     `json:"durability"`
	UniqueKey       string             `json:"unique_key,omitempty"`
	UniqueForMS     int64              `json:"unique_for_ms,omitempty"`
	Tags            []string           `json:"tags,omitempty"`
	Group           string             `json:"group,omitempty"`
	TraceParent     string             `json:"traceparent,omitempty"`
	Result          json.RawMessage    `json:"result,omitempty"`
	Errors          []job.AttemptError `json:"errors,omitempty"`
	Progress        json.RawMessage    `json:"progress,omitempty"`
	Lease           map[string]any     `json:"lease,omitempty"`
	Worker          string             `json:"worker,omitempty"`
	CancelRequested bool               `json:"cancel_requested"`
	CreatedAt       time.Time          `json:"created_at"`
	StartedAt       *time.Time         `json:"started_at,omitempty"`
	FinishedAt      *time.Time         `json:"finished_at,omitempty"`
	DeadLetterOf    *referenceRef      `json:"dead_letter_of,omitempty"`
}

type referenceRef struct {
	Queue string `json:"queue"`
	ID    string `json:"id"`
}

func referenceOf(j *job.Job) reference {
	r := reference{
		ID: j.ID, Queue: j.Queue, Kind: j.Kind, Payload: j.Payload, Priority: j.Priority, State: j.State,
		RunAt: j.RunAt, Attempt: j.Attempt, MaxAttempts: j.MaxAttempts,
		Backoff: map[string]any{"type": j.Backoff.Kind, "base_ms": j.Backoff.Base.Milliseconds(),
			"max_ms": j.Backoff.Max.Milliseconds(), "jitter": j.Backoff.Jitter},
		LeaseMS: j.LeaseDuration.Milliseconds(), Durability: j.Durability, UniqueKey: j.UniqueKey, UniqueForMS: j.UniqueFor.Milliseconds(),
		Tags: j.Tags, Group: j.Group, TraceParent: j.TraceParent, Worker: j.Worker, Result: j.Result, Errors: j.Errors, Progress: j.Progress, CancelRequested: j.CancelRequested,
		CreatedAt: j.CreatedAt, StartedAt: timeOrNil(j.StartedAt), FinishedAt: timeOrNil(j.FinishedAt),
	}
	if len(r.Payload) == 0 {
		r.Payload = json.RawMessage("null")
	}
	if r.Durability == "" {
		r.Durability = job.DurabilityFull
	}
	if j.State == job.StateActive {
		r.Lease = map[string]any{"token": j.LeaseToken, "expires_at": j.LeaseExpiresAt}
	}
	if !j.DeadLetterOf.IsZero() {
		r.DeadLetterOf = &referenceRef{Queue: j.DeadLetterOf.Queue, ID: j.DeadLetterOf.ID}
	}
	return r
}

func decodeAny(t *testing.T, data []byte) any {
	t.Helper()
	var v any
	if err := json.Unmarshal(data, &v); err != nil {
		t.Fatalf("not JSON: %v: %s", err, data)
	}
	return v
}

func randomJob(rng *rand.Rand) *job.Job {
	at := func() time.Time {
		return time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC).Add(time.Duration(rng.Int64N(int64(48 * time.Hour))))
	}
	texts := []string{"plain", `quo"te\back`, "tab\tnew\nline", "<b>&amp;</b>", "é ü 漢字", "bad \xff utf8", "sep \u2028 \u2029", "\x00\x1f"}
	pick := func() string { return texts[rng.IntN(len(texts))] }
	j := &job.Job{
		ID: job.NewID(at()), Queue: "q-1", Kind: "send.email", Priority: rng.IntN(2001) - 1000,
		State: job.States[rng.IntN(len(job.States))], RunAt: at(), Attempt: rng.IntN(5), MaxAttempts: 25,
		Backoff:       job.Backoff{Kind: job.BackoffExponential, Base: time.Second, Max: time.Hour, Jitter: rng.Float64()},
		LeaseDuration: time.Duration(rng.IntN(1e6)) * time.Millisecond, CreatedAt: at(),
		LeaseToken: rng.Int64N(1 << 53), CancelRequested: rng.IntN(2) == 0,
	}
	if rng.IntN(2) == 0 {
		j.Payload = json.RawMessage(`{"user": 42, "list": [1, 2.5, "x"]}`)
	}
	if rng.IntN(2) == 0 {
		j.UniqueKey, j.UniqueFor = pick(), time.Duration(rng.IntN(1e9))*time.Millisecond
	}
	if rng.IntN(2) == 0 {
		j.Tags = []string{"a", "b.c"}
	}
	if n := rng.IntN(len(job.Durabilities) + 1); n < len(job.Durabilities) {
		j.Durability = job.Durabilities[n] // else none, as from a store that keeps no level
	}
	if rng.IntN(2) == 0 {
		j.Result, j.Progress = json.RawMessage(`"done"`), json.RawMessage(`{"pct":50}`)
	}
	for i := 0; i < rng.IntN(3); i++ {
		j.Errors = append(j.Errors, job.AttemptError{Attempt: i + 1, Message: pick(), At: at()})
	}
	if j.State == job.StateActive {
		j.StartedAt, j.LeaseExpiresAt = at(), at()
	}
	if j.State.Final() {
		j.FinishedAt = at()
	}
	if rng.IntN(4) == 0 {
		j.DeadLetterOf = job.JobRef{Queue: pick(), ID: job.NewID(at())}
	}
	if rng.IntN(2) == 0 {
		j.Group = pick()
	}
	if rng.IntN(2) == 0 {
		j.Worker = pick()
	}
	if rng.IntN(2) == 0 {
		j.TraceParent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	}
	return j
}

// The hand-written job encoder agrees with encoding/json on every field,
// and sends payloads byte for byte.
func TestAppendJobMatchesEncodingJSON(t *testing.T) {
	t.Parallel()
	rng := rand.New(rand.NewPCG(3, 4))
	for i := 0; i < 2000; i++ {
		j := randomJob(rng)
		got := AppendJob(nil, j)
		want, err := json.Marshal(referenceOf(j))
		if err != nil {
			t.Fatal(err)
		}
		if g, w := decodeAny(t, got), decodeAny(t, want); !reflect.DeepEqual(g, w) {
			t.Fatalf("job %d:\n got %s\nwant %s", i, got, want)
		}
		if len(j.Payload) > 0 && !strings.Contains(string(got), `"payload":`+string(j.Payload)) {
			t.Fatalf("payload not sent as stored: %s", got)
		}
	}
}

// Strings are escaped exactly as encoding/json escapes them.
func TestAppendStringMatchesEncodingJSON(t *testing.T) {
	t.Parallel()
	for _, s := range []string{"", "plain", `q"b\`, "\x00\x01\x1f\x7f", "<>&", "\u2028\u2029", "é漢", "\xff\xfe", "a\xc3", "\t\n\r"} {
		want, _ := json.Marshal(s)
		if got := appendString(nil, s); string(got) != string(want) {
			t.Errorf("%q: got %s, want %s", s, got, want)
		}
	}
}

func BenchmarkAppendJobs100(b *testing.B) {
	rng := rand.New(rand.NewPCG(1, 1))
	jobs := make([]*job.Job, 100)
	for i := range jobs {
		jobs[i] = randomJob(rng)
	}
	buf := make([]byte, 0, 64<<10)
	for b.Loop() {
		buf = AppendJobs(buf[:0], jobs)
	}
}

func BenchmarkEncodingJSONJobs100(b *testing.B) {
	rng := rand.New(rand.NewPCG(1, 1))
	refs := make([]reference, 100)
	for i := range refs {
		refs[i] = referenceOf(randomJob(rng))
	}
	for b.Loop() {
		if _, err := json.Marshal(refs); err != nil {
			b.Fatal(err)
		}
	}
}

func timeOrNil(t time.Time) *time.Time {
	if t.IsZero() {
		return nil
	}
	return &t
}

// An event's data is what encoding/json makes of events.Event, byte for
// byte, with and without each field that may be left out.
func TestAppendEventMatchesEncodingJSON(t *testing.T) {
	t.Parallel()
	at := time.Date(2026, 11, 24, 9, 0, 0, 123456789, time.UTC)
	full := events.Event{ID: events.ID{Bus: 0x0123456789abcdef, Seq: 1 << 40}, Type: events.Failed, At: at, Job: "01JD3Y6Q4H2V8M5N7P9R0S1T2V", Queue: "emails",
		ConsumerGroup: "billing", Kind: "send", State: job.StateRetrying, Attempt: 3, Worker: "host-1/pid <7> & \u2028",
		Error: "smtp \"timeout\"\n\ttrace\x00\xff é", Waited: time.Second, Ran: time.Minute}
	for _, ev := range []events.Event{
		full,
		{ID: events.ID{Bus: 1, Seq: 1}, Type: events.Enqueued, At: at, Job: "j", Queue: "q"},
		{ID: events.ID{Bus: 1, Seq: 2}, Type: events.Deleted, At: time.Time{}, Job: "j", Queue: "q", Attempt: -1},
	} {
		want, err := json.Marshal(&ev)
		if err != nil {
			t.Fatal(err)
		}
		if got := AppendEvent(nil, &ev); string(got) != string(want) {
			t.Errorf("event %+v:\n got %s\nwant %s", ev, got, want)
		}
	}
	// Times go out in UTC, as the protocol says, whatever their zone.
	zoned := events.Event{ID: events.ID{Bus: 1, Seq: 1}, Type: events.Enqueued, At: at.In(time.FixedZone("X", 3600)), Job: "j", Queue: "q"}
	if got := AppendEvent(nil, &zoned); !strings.Contains(string(got), `"at":"2026-11-24T09:00:00.123456789Z"`) {
		t.Errorf("a time in another zone: %s", got)
	}
}

func BenchmarkAppendEvent(b *testing.B) {
	ev := events.Event{ID: events.ID{Bus: 0x7f3a9c0d12e4b7a8, Seq: 1042}, Type: events.Completed, At: time.Now(), Job: "01JD3Y6Q4H2V8M5N7P9R0S1T2V", Queue: "emails",
		Kind: "send", State: job.StateCompleted, Attempt: 1}
	buf := make([]byte, 0, 512)
	b.ReportAllocs()
	for b.Loop() {
		buf = AppendEvent(buf[:0], &ev)
	}
}
