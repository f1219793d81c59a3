package wire

import (
	"bytes"
	"fmt"
	"net/http/httptest"
	"reflect"
	"strings"
	"testing"
	"unicode/utf8"
)

// fastCases are enqueue bodies of every shape: each field, each kind of
// payload, and the things the fast decoder leaves to encoding/json.
var fastCases = []string{
	`{"kind":"send"}`,
	`{"id":"a1","queue":"emails","kind":"send","payload":{"user":42,"tags":["x",null],"s":"q\"uote}"},"priority":-5,
	"run_at":"2026-11-23T08:00:00.5Z","delay_ms":0,"max_attempts":3,"backoff":{"type":"exponential","base_ms":100,
	"max_ms":60000,"jitter":0.25},"lease_ms":30000,"unique_key":"k","unique_for_ms":1000,"tags":["a","b"],"durability":"memory"}`,
	` { "kind" : "k" , "payload" : [1, 2.5e3, true, false, "x"] , "tags" : [ ] } `,
	`{"kind":"k","payload":"just a string"}`,
	`{"kind":"k","payload":12.5}`,
	`{"kind":"k","payload":true}`,
	`{"kind":"k","payload":null}`,
	`{"kind":"k","payload":{}}`,
	`{"kind":"k\u00e9"}`,
	`{"Kind":"k"}`,
	`{"kind":"k","kind":"j"}`,
	`{"kind":"k","priority":1.0}`,
	`{"kind":"k","priority":1e2}`,
	`{"kind":"k","priority":99999999999999999999}`,
	`{"kind":"k","max_attempts":null}`,
	`{"kind":"k","run_at":"yesterday"}`,
	`{"kind":"k","backoff":{"jitter":1e400}}`,
	`{"kind":"k","backoff":{"type":"fixed","type":"fixed"}}`,
	`{"kind":"k","tags":["a",1]}`,
	`{"kind":"k","extra":1}`,
	`{"kind":"k"} {}`,
	`{"kind":"k",}`,
	`{"kind":"é—ü"}`,
	`{"kind":"k","traceparent":"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"}`,
	`{"kind":"k","traceparent":"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01","traceparent":"x"}`,
	`{"kind":"k","traceparent":"\u0030\u0030-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"}`,
	`{"kind":"k","traceparent":null}`,
	`{"kind":"k","traceparent":""}`,
	`{"kind":"k","traceparent":1}`,
}

// checkFast decodes body both ways, alone and in a batch: whatever the
// fast decoder accepts, encoding/json with the exact-key check must accept
// too, with the same result.
func checkFast(t *testing.T, body []byte) {
	t.Helper()
	body = bytes.Trim(body, jsonSpace) // as DecodeBody hands bodies on
	if !utf8.Valid(body) || len(body) == 0 || body[0] != '{' {
		return
	}
	sameAsStrict[EnqueueJob](t, body)
	sameAsStrict[EnqueueBatch](t, append(append([]byte(`{"jobs":[`), body...), `,{"kind":"b"}]}`...))
}

// sameAsStrict checks that a body the fast decoder takes into a T decodes
// to the same T with decodeStrict.
func sameAsStrict[T any](t *testing.T, body []byte) {
	t.Helper()
	var fast, strict T
	if !fastDecode(body, &fast) {
		return
	}
	if err := decodeStrict(body, &strict); err != nil {
		t.Fatalf("fast decoder accepted %q, encoding/json refuses it: %v", body, err)
	}
	if !reflect.DeepEqual(fast, strict) {
		t.Fatalf("%q decodes to\n%#v\nwith the fast decoder, to\n%#v\nwith encoding/json", body, fast, strict)
	}
}

// The fast decoder takes the common bodies and gives up on the rest, and
// what it takes it decodes as encoding/json does.
func TestFastDecodeMatchesEncodingJSON(t *testing.T) {
	t.Parallel()
	for _, body := range fastCases {
		checkFast(t, []byte(body))
	}
	for _, body := range []string{fastCases[0], fastCases[1], fastCases[3], `{"kind":"é—ü"}`,
		`{"kind":"k","traceparent":"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"}`} {
		var j EnqueueJob
		if !fastDecode([]byte(body), &j) {
			t.Errorf("the fast decoder gave up on %q", body)
		}
	}
	for _, body := range []string{`{"kind":"k\u00e9"}`, `{"Kind":"k"}`, `{"kind":"k","kind":"j"}`, `{"kind":"k","priority":1.0}`,
		`{"kind":"k","payload":null}`, `{"kind":"k","max_attempts":null}`, `{"kind":"k","extra":1}`} {
		var j EnqueueJob
		if fastDecode([]byte(body), &j) {
			t.Errorf("the fast decoder took %q, which it must leave to encoding/json", body)
		}
	}
	var empty EnqueueBatch
	if !fastDecode([]byte(`{"jobs":[]}`), &empty) || empty.Jobs == nil || len(empty.Jobs) != 0 {
		t.Errorf(`{"jobs":[]} decodes to %#v, want an empty, non-nil list`, empty)
	}
}

// FuzzFastDecodeMatchesEncodingJSON checks checkFast on any body, seeded
// with the cases above. Its corpus in testdata/fuzz holds the bodies of
// the API's enqueue fuzz targets and what fuzzing it found; go test
// replays them all.
func FuzzFastDecodeMatchesEncodingJSON(f *testing.F) {
	for _, body := range fastCases {
		f.Add([]byte(body))
	}
	f.Fuzz(func(t *testing.T, body []byte) { checkFast(t, body) })
}

// BenchmarkDecodeEnqueueBatch1000 is the decoding of a batch enqueue body
// alone: reading it, the checks of DecodeBody, and the fast decoder.
func BenchmarkDecodeEnqueueBatch1000(b *testing.B) {
	var sb strings.Builder
	sb.WriteString(`{"jobs":[`)
	for i := range 1000 {
		if i > 0 {
			sb.WriteByte(',')
		}
		fmt.Fprintf(&sb, `{"queue":"bench.q","kind":"send.email","payload":{"user":%d,"template":"welcome","tags":["a","b"]},"priority":%d,"max_attempts":5,"durability":"memory"}`, i, i%10)
	}
	sb.WriteString(`]}`)
	body := []byte(sb.String())
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	for b.Loop() {
		req := httptest.NewRequest("POST", "/v1/jobs/batch", bytes.NewReader(body))
		var in EnqueueBatch
		if err := DecodeBody(nil, req, 64<<20, &in, false); err != nil || len(in.Jobs) != 1000 {
			b.Fatalf("decode: %d jobs, %v", len(in.Jobs), err)
		}
	}
}
