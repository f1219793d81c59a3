package bench

import (
	"bytes"
	"regexp"
	"strings"
	"testing"
	"time"
)

func TestOptionsDefaults(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		in   Options
		want func(o Options) bool
	}{
		{Options{Mode: ModeEnqueue}, func(o Options) bool {
			return o.Jobs == 50_000 && o.Batch == 1 && o.Concurrency == 10 && o.Workers == 0 && o.Sync == "full" && o.Queues == 1 && o.PayloadBytes == 100
		}},
		{Options{Mode: ModeEnqueueBatch}, func(o Options) bool { return o.Jobs == 500_000 && o.Batch == 100 && o.Concurrency == 10 }},
		{Options{Mode: ModeProcess}, func(o Options) bool {
			return o.Jobs == 200_000 && o.Batch == 1000 && o.Workers == 1 && o.Concurrency == 100 && o.Producers == 0
		}},
		{Options{Mode: ModeLifecycle}, func(o Options) bool {
			return o.Jobs == 50_000 && o.Batch == 1 && o.Producers == 10 && o.Workers == 1 && o.Concurrency == 100
		}},
		{Options{Mode: ModeLifecycle, Duration: time.Second}, func(o Options) bool { return o.Jobs == 0 && o.Duration == time.Second }},
		{Options{Mode: ModeLatency}, func(o Options) bool {
			return o.Jobs == 0 && o.Duration == 10*time.Second && o.Rate == 1000 && o.Producers == 50 && o.Batch == 1
		}},
		{Options{Mode: ModeLatency, Rate: 20}, func(o Options) bool { return o.Producers == 8 }},
		{Options{Mode: ModeLatency, Rate: 1e6}, func(o Options) bool { return o.Producers == 512 }},
		{Options{Mode: ModeEnqueue, Server: "http://h:1/"}, func(o Options) bool { return o.Server == "http://h:1" }},
		{Options{Mode: ModeEnqueue}, func(o Options) bool { return o.Transport == TransportHTTP }},
		{Options{Mode: ModeLifecycle, Transport: TransportStream, Server: "http://h:1"}, func(o Options) bool { return o.Transport == TransportStream }},
	} {
		got, err := tc.in.withDefaults()
		if err != nil {
			t.Errorf("%+v: %v", tc.in, err)
			continue
		}
		if !tc.want(got) {
			t.Errorf("%+v: defaults %+v", tc.in, got)
		}
	}
}

func TestOptionsBounds(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		in   Options
		want string
	}{
		{Options{Mode: "fast"}, "unknown mode"},
		{Options{Mode: ModeEnqueue, Sync: "off"}, "sync"},
		{Options{Mode: ModeEnqueue, Transport: "grpc"}, "transport"},
		{Options{Mode: ModeEnqueue, Transport: TransportStream, Server: "https://h:1"}, "needs an http:// URL"},
		{Options{Mode: ModeEnqueue, Server: "localhost:7311"}, "want a URL"},
		{Options{Mode: ModeEnqueue, ServerPID: 12}, "needs a server URL"},
		{Options{Mode: ModeEnqueue, Token: "abc"}, "needs a server URL"},
		{Options{Mode: ModeEnqueue, Batch: 2}, "use enqueue-batch"},
		{Options{Mode: ModeLatency, Batch: 2}, "one job per request"},
		{Options{Mode: ModeProcess, Duration: time.Second}, "does not apply to process"},
		{Options{Mode: ModeEnqueue, Duration: -1}, "duration"},
		{Options{Mode: ModeEnqueue, Jobs: -1}, "jobs -1"},
		{Options{Mode: ModeEnqueue, Jobs: MaxJobs + 1}, "jobs"},
		{Options{Mode: ModeEnqueueBatch, Batch: MaxBatch + 1}, "batch"},
		{Options{Mode: ModeEnqueue, Concurrency: -3}, "concurrency"},
		{Options{Mode: ModeProcess, Workers: MaxWorkers + 1}, "workers"},
		{Options{Mode: ModeEnqueue, Queues: MaxQueues + 1}, "queues"},
		{Options{Mode: ModeEnqueue, PayloadBytes: MaxPayloadBytes + 1}, "payload"},
		{Options{Mode: ModeEnqueueBatch, Batch: 1000, PayloadBytes: 100_000}, "MiB requests"},
		{Options{Mode: ModeLatency, Rate: -1}, "rate"},
		{Options{Mode: ModeLatency, Rate: MaxRate * 2}, "rate"},
		{Options{Mode: ModeProcess, Work: -time.Second}, "work"},
		{Options{Mode: ModeProcess, Work: 2 * MaxWork}, "work"},
		{Options{Mode: ModeEnqueue, Work: time.Millisecond}, "modes with workers"},
		{Options{Mode: ModeEnqueue, Timeout: -time.Second}, "timeout"},
	} {
		if _, err := tc.in.withDefaults(); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%+v: err %v, want %q", tc.in, err, tc.want)
		}
	}
}

func TestBodies(t *testing.T) {
	t.Parallel()
	o, err := Options{Mode: ModeEnqueueBatch, Jobs: 7, Batch: 3, PayloadBytes: 40}.withDefaults()
	if err != nil {
		t.Fatal(err)
	}
	b := newBodies(o, []string{"q1", "q2"})
	if got := string(b.single[1][0]); got != `{"queue":"q2","kind":"bench","payload":{"d":"`+strings.Repeat("x", 32)+`"}}` {
		t.Fatalf("single body %s", got)
	}
	if n := strings.Count(string(b.batch[0][0]), `"kind"`); n != 3 {
		t.Fatalf("batch of %d jobs", n)
	}
	if n := strings.Count(string(b.partial[0][0]), `"kind"`); n != 1 {
		t.Fatalf("last batch of %d jobs", n)
	}
	// With groups, the batches of a queue reach every group between them.
	o.Groups = 7
	g := newBodies(o, []string{"q1"})
	groups := map[string]bool{}
	for _, body := range g.batch[0] {
		for _, part := range strings.Split(string(body), `"group":"`)[1:] {
			groups[part[:strings.IndexByte(part, '"')]] = true
		}
	}
	if len(groups) != 7 || len(g.batch[0]) != 3 {
		t.Fatalf("%d batch bodies reach groups %v, want 3 reaching g0-g6", len(g.batch[0]), groups)
	}
	timed := string(b.appendTimed(nil, 0, 1234567890123456789))
	payload := timed[strings.Index(timed, `"payload":`)+len(`"payload":`) : len(timed)-1]
	if len(payload) != 40 || !strings.HasPrefix(payload, `{"t":1234567890123456789,"d":"x`) {
		t.Fatalf("timed payload %s (%d bytes)", payload, len(payload))
	}
	if got := string(b.appendFetch(nil, 17)); got != `{"queues":["q1","q2"],"wait_ms":1000,"max":17}` {
		t.Fatalf("fetch body %s", got)
	}
}

func TestPrintErrorsLoudly(t *testing.T) {
	t.Parallel()
	res := &Result{Mode: ModeEnqueue, Server: "embedded", CPUs: 2, Seconds: 1}
	res.addError("POST /v1/jobs: 503 Service Unavailable")
	res.addError("POST /v1/jobs: 503 Service Unavailable")
	var b bytes.Buffer
	Print(&b, res)
	out := b.String()
	if strings.Count(out, "THIS RUN HAD 2 ERRORS") != 2 || !strings.Contains(out, "503 Service Unavailable") {
		t.Fatalf("errors not loud:\n%s", out)
	}
	if len(res.ErrorSamples) != 1 {
		t.Fatalf("samples %q", res.ErrorSamples)
	}
	if !regexp.MustCompile(`server CPU +unknown   peak RSS unknown`).MatchString(out) || strings.Contains(out, "latency ms") {
		t.Fatalf("unknown figures not shown as unknown:\n%s", out)
	}
}

func TestThousands(t *testing.T) {
	t.Parallel()
	for v, want := range map[float64]string{0: "0", 999: "999", 1000: "1,000", 1234567.6: "1,234,568", -4321: "-4,321"} {
		if got := thousands(v); got != want {
			t.Errorf("thousands(%v) = %q, want %q", v, got, want)
		}
	}
}
