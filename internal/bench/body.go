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
	// single, batch and partial hold, per queue, the bodies of each group
	// offset: a run with Groups spreads its jobs over the groups in turn,
	// batch after batch, and a call takes the offsets in turn too. A run
	// without groups has one offset.
	single  [][][]byte
	batch   [][][]byte
	partial [][][]byte // nil when Jobs is a multiple of Batch
	// payload is one job's payload, for the Batcher.
	payload json.RawMessage
	timed   [][2]string
	fetch   []byte
}

// maxGroupBodies bounds the bodies built per queue for the group offsets.
const maxGroupBodies = 1024

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
		job := func(group int) string {
			g := ""
			if o.Groups > 0 {
				g = `"group":"g` + strconv.Itoa(group%o.Groups) + `",`
			}
			return head + g + `"payload":{"d":"` + filler + `"}}`
		}
		var single, batch, partial [][]byte
		for v := range groupOffsets(o) {
			single = append(single, []byte(job(v)))
			batch = append(batch, batchBody(job, v*o.Batch, o.Batch))
			if rem > 0 {
				partial = append(partial, batchBody(job, v*o.Batch, rem))
			}
		}
		b.single, b.batch = append(b.single, single), append(b.batch, batch)
		if rem > 0 {
			b.partial = append(b.partial, partial)
		}
		b.timed = append(b.timed, [2]string{head + `"payload":{"t":`, `,"d":"` + timedFiller + `"}}`})
	}
	var f strings.Builder
	f.WriteString(`{"queues":[`)
	for i, q := range queues {
		if i > 0 {
			f.WriteByte(',')
		}
		f.WriteString(strconv.Quote(q))
	}
	f.WriteString(`],`)
	if o.Runs {
		f.WriteString(`"runs":true,`)
	}
	if o.MaxGroups > 0 {
		f.WriteString(`"max_groups":` + strconv.Itoa(o.MaxGroups) + `,`)
	}
	f.WriteString(`"wait_ms":` + strconv.Itoa(fetchWaitMS) + `,"max":`)
	b.fetch = []byte(f.String())
	return b
}

// groupOffsets is how many different bodies each kind of request takes,
// so that a run's calls reach all its groups: one without groups.
func groupOffsets(o Options) int {
	if o.Groups == 0 {
		return 1
	}
	return min((o.Groups+o.Batch-1)/o.Batch, maxGroupBodies)
}

// batchBody is a batch of n jobs, the i-th made by job(first+i).
func batchBody(job func(i int) string, first, n int) []byte {
	var s strings.Builder
	s.WriteString(`{"jobs":[`)
	for i := 0; i < n; i++ {
		if i > 0 {
			s.WriteByte(',')
		}
		s.WriteString(job(first + i))
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
