package bench

import (
	"encoding/json"
	"strconv"
	"strings"
)

// fetchWaitMS is the long poll of every fetch. Runs end by cancelling the
// parked fetches, so it only bounds how long an idle worker sleeps.
const fetchWaitMS = 1000

// bodies are the run's request bodies, built once before the run so that
// sending costs no encoding: per queue, one job, a batch of Batch jobs and
// the smaller last batch; the fixed parts of the latency mode's single
// job, whose payload carries its scheduled enqueue time; and the start of
// every fetch.
type bodies struct {
	single [][]byte
	// payload is one job's payload, for the Batcher.
	payload json.RawMessage
	batch   [][]byte
	partial [][]byte // nil when Jobs is a multiple of Batch
	timed   [][2]string
	fetch   []byte
}

// payloadOverhead is the size of the payload around its filler:
// {"d":""}.
const payloadOverhead = 8

// timedOverhead is the size of the latency mode's payload around its
// filler, with a 19-digit time: {"t":1234567890123456789,"d":""}.
const timedOverhead = payloadOverhead + len(`"t":1234567890123456789,`)

func newBodies(o Options, queues []string) *bodies {
	b := &bodies{}
	filler := strings.Repeat("x", max(o.PayloadBytes-payloadOverhead, 0))
	b.payload = json.RawMessage(`{"d":"` + filler + `"}`)
	timedFiller := strings.Repeat("x", max(o.PayloadBytes-timedOverhead, 0))
	rem := 0
	if o.Jobs > 0 {
		rem = o.Jobs % o.Batch
	}
	for _, q := range queues {
		head := `{"queue":` + strconv.Quote(q) + `,"kind":"bench",`
		if o.Durability != "" {
			head += `"durability":` + strconv.Quote(o.Durability) + `,`
		}
		head += `"payload":`
		job := head + `{"d":"` + filler + `"}}`
		b.single = append(b.single, []byte(job))
		b.batch = append(b.batch, batchBody(job, o.Batch))
		if rem > 0 {
			b.partial = append(b.partial, batchBody(job, rem))
		}
		b.timed = append(b.timed, [2]string{head + `{"t":`, `,"d":"` + timedFiller + `"}}`})
	}
	var f strings.Builder
	f.WriteString(`{"queues":[`)
	for i, q := range queues {
		if i > 0 {
			f.WriteByte(',')
		}
		f.WriteString(strconv.Quote(q))
	}
	f.WriteString(`],"wait_ms":` + strconv.Itoa(fetchWaitMS) + `,"max":`)
	b.fetch = []byte(f.String())
	return b
}

func batchBody(job string, n int) []byte {
	var s strings.Builder
	s.Grow(len(job)*n + 16)
	s.WriteString(`{"jobs":[`)
	for i := 0; i < n; i++ {
		if i > 0 {
			s.WriteByte(',')
		}
		s.WriteString(job)
	}
	s.WriteString(`]}`)
	return []byte(s.String())
}

// appendFetch appends a fetch body asking for up to n jobs.
func (b *bodies) appendFetch(dst []byte, n int) []byte {
	dst = append(dst, b.fetch...)
	dst = strconv.AppendInt(dst, int64(n), 10)
	return append(dst, '}')
}

// appendTimed appends a single-job body for queue q whose payload carries
// the scheduled enqueue time at (Unix nanoseconds).
func (b *bodies) appendTimed(dst []byte, q int, at int64) []byte {
	dst = append(dst, b.timed[q][0]...)
	dst = strconv.AppendInt(dst, at, 10)
	return append(dst, b.timed[q][1]...)
}
