package httpapi

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/spoolq/spool/internal/httpapi/auth"
)

// The benchmarks of the API's hot paths run the real handler on a real
// store: a batch enqueue (whose body the fast decoder reads), a single
// enqueue, and a fetch followed by the batch ack of what it handed out.
// Each runs with auth off and with a token limited to a namespace, whose
// scope checks then run on every call. The jobs are of memory durability,
// so that the disk's fsync does not hide the API's own time.

// benchTokens are the tokens of the benchmarks with auth on.
var benchTokens = []auth.Token{{Name: "bench", Role: auth.RoleAdmin, Namespaces: []string{"bench."}, Secret: "bench-secret-0123456789abcdef"}}

// benchAPI returns an API with auth off or with benchTokens.
func benchAPI(b *testing.B, limited bool) (a *API, authz string) {
	b.Helper()
	var opts Options
	if limited {
		au, err := auth.New(benchTokens)
		if err != nil {
			b.Fatal(err)
		}
		opts.Auth, authz = au, "Bearer "+benchTokens[0].Secret
	}
	return newTestAPIWith(b, opts), authz
}

// benchServe sends one request and fails the benchmark unless it gets
// want.
func benchServe(b *testing.B, a *API, method, target, authz string, body []byte, want int) *httptest.ResponseRecorder {
	req := httptest.NewRequest(method, target, bytes.NewReader(body))
	if authz != "" {
		req.Header.Set("Authorization", authz)
	}
	rec := httptest.NewRecorder()
	a.ServeHTTP(rec, req)
	if rec.Code != want {
		b.Fatalf("%s %s: %d %s, want %d", method, target, rec.Code, rec.Body, want)
	}
	return rec
}

// benchBatchBody is a batch enqueue body of n jobs into q in the shape
// producers send.
func benchBatchBody(q string, n int) []byte {
	var sb strings.Builder
	sb.WriteString(`{"jobs":[`)
	for i := range n {
		if i > 0 {
			sb.WriteByte(',')
		}
		fmt.Fprintf(&sb, `{"queue":%q,"kind":"send.email","payload":{"user":%d,"template":"welcome","tags":["a","b"]},"priority":%d,"max_attempts":5,"durability":"memory"}`, q, i, i%10)
	}
	sb.WriteString(`]}`)
	return []byte(sb.String())
}

// benchPurgeEvery bounds the jobs the enqueue benchmarks leave in the
// store: it is purged, off the clock, after this many jobs.
const benchPurgeEvery = 50_000

// benchStored counts n more jobs in *stored and, off the clock, purges
// the benchmarks' queue once it holds benchPurgeEvery.
func benchStored(b *testing.B, a *API, stored *int, n int) {
	if *stored += n; *stored < benchPurgeEvery {
		return
	}
	b.StopTimer()
	if _, err := a.engine.Purge(context.Background(), "bench.q"); err != nil {
		b.Fatal(err)
	}
	*stored = 0
	b.StartTimer()
}

func benchEnqueue(b *testing.B, limited bool, target string, body []byte, perCall int, want int) {
	a, authz := benchAPI(b, limited)
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	stored := 0
	for b.Loop() {
		benchServe(b, a, "POST", target, authz, body, want)
		benchStored(b, a, &stored, perCall)
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*perCall), "ns/job")
}

func BenchmarkEnqueueBatch1000(b *testing.B) {
	body := benchBatchBody("bench.q", 1000)
	for _, limited := range []bool{false, true} {
		b.Run(fmt.Sprintf("limited=%v", limited), func(b *testing.B) {
			benchEnqueue(b, limited, "/v1/jobs/batch", body, 1000, http.StatusOK)
		})
	}
}

func BenchmarkEnqueueOne(b *testing.B) {
	body := []byte(`{"queue":"bench.q","kind":"send.email","payload":{"user":42,"template":"welcome"},"durability":"memory"}`)
	for _, limited := range []bool{false, true} {
		b.Run(fmt.Sprintf("limited=%v", limited), func(b *testing.B) {
			benchEnqueue(b, limited, "/v1/jobs", body, 1, http.StatusCreated)
		})
	}
}

// BenchmarkEnqueueTogether serves 32 single enqueues that came together
// on a stream as one batch (serveEnqueues), as the stream server does.
func BenchmarkEnqueueTogether(b *testing.B) {
	const n = 32
	body := []byte(`{"queue":"bench.q","kind":"send.email","payload":{"user":42,"template":"welcome"},"durability":"memory"}`)
	for _, limited := range []bool{false, true} {
		b.Run(fmt.Sprintf("limited=%v", limited), func(b *testing.B) {
			a, authz := benchAPI(b, limited)
			b.ReportAllocs()
			stored := 0
			rs := make([]*http.Request, n)
			ws := make([]http.ResponseWriter, n)
			recs := make([]*httptest.ResponseRecorder, n)
			for b.Loop() {
				b.StopTimer() // the stream server makes its requests more cheaply
				for i := range n {
					rs[i] = httptest.NewRequest("POST", "/v1/jobs", bytes.NewReader(body))
					if authz != "" {
						rs[i].Header.Set("Authorization", authz)
					}
					recs[i] = httptest.NewRecorder()
					ws[i] = recs[i]
				}
				b.StartTimer()
				a.serveEnqueues(context.Background(), rs, ws)
				for i := range n {
					if recs[i].Code != http.StatusCreated {
						b.Fatalf("enqueue %d: %d %s", i, recs[i].Code, recs[i].Body)
					}
				}
				benchStored(b, a, &stored, n)
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*n), "ns/job")
		})
	}
}

// BenchmarkFetchAck100 fetches 100 jobs and acks them in one batch call;
// the enqueue of the next 100 is off the clock.
func BenchmarkFetchAck100(b *testing.B) {
	const n = 100
	fill := benchBatchBody("bench.q", n)
	fetch := []byte(`{"queues":["bench.q"],"max":100}`)
	for _, limited := range []bool{false, true} {
		b.Run(fmt.Sprintf("limited=%v", limited), func(b *testing.B) {
			a, authz := benchAPI(b, limited)
			b.ReportAllocs()
			var acks bytes.Buffer
			for b.Loop() {
				b.StopTimer()
				benchServe(b, a, "POST", "/v1/jobs/batch", authz, fill, http.StatusOK)
				b.StartTimer()
				rec := benchServe(b, a, "POST", "/v1/fetch", authz, fetch, http.StatusOK)
				var out struct {
					Jobs []struct {
						ID    string `json:"id"`
						Lease struct {
							Token int64 `json:"token"`
						} `json:"lease"`
					} `json:"jobs"`
				}
				b.StopTimer()
				if err := json.Unmarshal(rec.Body.Bytes(), &out); err != nil || len(out.Jobs) != n {
					b.Fatalf("fetch: %d jobs, %v", len(out.Jobs), err)
				}
				acks.Reset()
				acks.WriteString(`{"items":[`)
				for i, j := range out.Jobs {
					if i > 0 {
						acks.WriteByte(',')
					}
					fmt.Fprintf(&acks, `{"id":%q,"token":%d}`, j.ID, j.Lease.Token)
				}
				acks.WriteString(`]}`)
				b.StartTimer()
				benchServe(b, a, "POST", "/v1/jobs/ack", authz, acks.Bytes(), http.StatusOK)
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*n), "ns/job")
		})
	}
}
