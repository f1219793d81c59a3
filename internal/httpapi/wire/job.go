package wire

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"time"
	"unicode/utf8"

	"github.com/spoolq/spool/internal/job"
)

// The job encoder below writes a job's JSON straight into a buffer: fetch
// and listing answers carry hundreds of jobs, and encoding them through
// reflection cost more than the rest of a fetch. Fields with no value are
// omitted. Payloads, results and progress reports go out byte for byte as
// they were sent.

// AppendJob appends j as a JSON object, the form of a job in every
// answer.
func AppendJob(b []byte, j *job.Job) []byte {
	b = append(b, `{"id":`...)
	b = appendString(b, j.ID)
	b = append(b, `,"queue":`...)
	if queue, group, lane := job.SplitLane(j.Queue); lane {
		b = appendString(b, queue)
		b = append(b, `,"consumer_group":`...)
		b = appendString(b, group)
	} else {
		b = appendString(b, j.Queue)
	}
	b = append(b, `,"kind":`...)
	b = appendString(b, j.Kind)
	b = append(b, `,"payload":`...)
	b = appendRaw(b, j.Payload)
	b = append(b, `,"priority":`...)
	b = strconv.AppendInt(b, int64(j.Priority), 10)
	b = append(b, `,"state":`...)
	b = appendString(b, string(j.State))
	b = append(b, `,"run_at":`...)
	b = appendTime(b, j.RunAt)
	b = append(b, `,"attempt":`...)
	b = strconv.AppendInt(b, int64(j.Attempt), 10)
	b = append(b, `,"max_attempts":`...)
	b = strconv.AppendInt(b, int64(j.MaxAttempts), 10)
	b = append(b, `,"backoff":{"type":`...)
	b = appendString(b, string(j.Backoff.Kind))
	b = append(b, `,"base_ms":`...)
	b = strconv.AppendInt(b, millis(j.Backoff.Base), 10)
	b = append(b, `,"max_ms":`...)
	b = strconv.AppendInt(b, millis(j.Backoff.Max), 10)
	b = append(b, `,"jitter":`...)
	b = strconv.AppendFloat(b, j.Backoff.Jitter, 'g', -1, 64)
	b = append(b, `},"lease_ms":`...)
	b = strconv.AppendInt(b, millis(j.LeaseDuration), 10)
	b = append(b, `,"durability":`...)
	b = appendString(b, string(DurabilityOf(j.Durability)))
	if j.UniqueKey != "" {
		b = append(b, `,"unique_key":`...)
		b = appendString(b, j.UniqueKey)
	}
	if j.UniqueFor != 0 {
		b = append(b, `,"unique_for_ms":`...)
		b = strconv.AppendInt(b, millis(j.UniqueFor), 10)
	}
	if len(j.Tags) > 0 {
		b = append(b, `,"tags":[`...)
		for i, t := range j.Tags {
			if i > 0 {
				b = append(b, ',')
			}
			b = appendString(b, t)
		}
		b = append(b, ']')
	}
	if j.Group != "" {
		b = append(b, `,"group":`...)
		b = appendString(b, j.Group)
	}
	if j.TraceParent != "" {
		b = append(b, `,"traceparent":`...)
		b = appendString(b, j.TraceParent)
	}
	if len(j.Result) > 0 {
		b = append(b, `,"result":`...)
		b = appendRaw(b, j.Result)
	}
	if len(j.Errors) > 0 {
		b = append(b, `,"errors":[`...)
		for i, e := range j.Errors {
			if i > 0 {
				b = append(b, ',')
			}
			b = append(b, `{"attempt":`...)
			b = strconv.AppendInt(b, int64(e.Attempt), 10)
			b = append(b, `,"message":`...)
			b = appendString(b, e.Message)
			b = append(b, `,"at":`...)
			b = appendTime(b, e.At)
			b = append(b, '}')
		}
		b = append(b, ']')
	}
	if j.ErrorsDropped > 0 {
		b = append(b, `,"errors_dropped":`...)
		b = strconv.AppendInt(b, int64(j.ErrorsDropped), 10)
	}
	if len(j.Progress) > 0 {
		b = append(b, `,"progress":`...)
		b = appendRaw(b, j.Progress)
	}
	if j.State == job.StateActive {
		b = append(b, `,"lease":{"token":`...)
		b = strconv.AppendInt(b, j.LeaseToken, 10)
		b = append(b, `,"expires_at":`...)
		b = appendTime(b, j.LeaseExpiresAt)
		b = append(b, '}')
	}
	if j.Worker != "" {
		b = append(b, `,"worker":`...)
		b = appendString(b, j.Worker)
	}
	b = append(b, `,"cancel_requested":`...)
	b = strconv.AppendBool(b, j.CancelRequested)
	b = append(b, `,"created_at":`...)
	b = appendTime(b, j.CreatedAt)
	if !j.StartedAt.IsZero() {
		b = append(b, `,"started_at":`...)
		b = appendTime(b, j.StartedAt)
	}
	if !j.FinishedAt.IsZero() {
		b = append(b, `,"finished_at":`...)
		b = appendTime(b, j.FinishedAt)
	}
	if !j.DeadLetterOf.IsZero() {
		b = append(b, `,"dead_letter_of":{"queue":`...)
		b = appendString(b, j.DeadLetterOf.Queue)
		b = append(b, `,"id":`...)
		b = appendString(b, j.DeadLetterOf.ID)
		b = append(b, '}')
	}
	return append(b, '}')
}

// DurabilityOf is the wire form of a stored level: a store that keeps no
// level of its own keeps every job fully durable.
func DurabilityOf(d job.Durability) job.Durability {
	if d == "" {
		return job.DurabilityFull
	}
	return d
}

// AppendJobs appends jobs as a JSON array.
func AppendJobs(b []byte, jobs []*job.Job) []byte {
	b = append(b, '[')
	for i, j := range jobs {
		if i > 0 {
			b = append(b, ',')
		}
		b = AppendJob(b, j)
	}
	return append(b, ']')
}

// appendRaw appends a stored JSON value as it is; none is null.
func appendRaw(b []byte, raw json.RawMessage) []byte {
	if len(raw) == 0 {
		return append(b, "null"...)
	}
	return append(b, raw...)
}

// appendTime appends t as an RFC 3339 string in UTC, as encoding/json
// writes a time.Time.
func appendTime(b []byte, t time.Time) []byte {
	b = append(b, '"')
	b = t.UTC().AppendFormat(b, time.RFC3339Nano)
	return append(b, '"')
}

// appendString appends s as a JSON string: quotes, backslashes and control
// characters escaped, invalid UTF-8 replaced by U+FFFD, and <, > and &
// escaped as encoding/json does, so the answer is safe inside HTML.
func appendString(b []byte, s string) []byte {
	const hex = "0123456789abcdef"
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if c >= 0x20 && c != '"' && c != '\\' && c != '<' && c != '>' && c != '&' {
				i++
				continue
			}
			b = append(b, s[start:i]...)
			switch c {
			case '"', '\\':
				b = append(b, '\\', c)
			case '\n':
				b = append(b, '\\', 'n')
			case '\r':
				b = append(b, '\\', 'r')
			case '\t':
				b = append(b, '\\', 't')
			default:
				b = append(b, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xf])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			b = append(b, s[start:i]...)
			b = append(b, `\ufffd`...)
			i += size
			start = i
			continue
		}
		if r == '\u2028' || r == '\u2029' {
			b = append(b, s[start:i]...)
			b = append(b, '\\', 'u', '2', '0', '2', hex[r&0xf])
			i += size
			start = i
			continue
		}
		i += size
	}
	b = append(b, s[start:]...)
	return append(b, '"')
}

// millis is d in whole milliseconds, for the wire.
func millis(d time.Duration) int64 { return d.Milliseconds() }

// WriteJobs answers 200 with {"jobs": [...]} and, when next is set,
// "next_cursor".
func WriteJobs(w http.ResponseWriter, jobs []*job.Job, next string) {
	buf := getBuffer()
	defer putBuffer(buf)
	b := append(buf.AvailableBuffer(), `{"jobs":`...)
	b = AppendJobs(b, jobs)
	if next != "" {
		b = append(b, `,"next_cursor":`...)
		b = appendString(b, next)
	}
	b = append(b, "}\n"...)
	buf.Write(b)
	writeBody(w, http.StatusOK, buf.Bytes())
}

// WriteJob answers 200 with one job.
func WriteJob(w http.ResponseWriter, j *job.Job) {
	buf := getBuffer()
	defer putBuffer(buf)
	b := AppendJob(buf.AvailableBuffer(), j)
	buf.Write(append(b, '\n'))
	writeBody(w, http.StatusOK, buf.Bytes())
}

// WriteJSON answers status with v encoded by encoding/json. It writes
// nothing when v cannot be encoded, and returns the error, so that the
// caller can answer something else.
func WriteJSON(w http.ResponseWriter, status int, v any) error {
	buf := getBuffer()
	defer putBuffer(buf)
	if err := json.NewEncoder(buf).Encode(v); err != nil {
		return fmt.Errorf("encode answer: %w", err)
	}
	writeBody(w, status, buf.Bytes())
	return nil
}

// writeBody answers status with body, which is JSON.
func writeBody(w http.ResponseWriter, status int, body []byte) {
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("Content-Length", strconv.Itoa(len(body)))
	w.WriteHeader(status)
	_, _ = w.Write(body)
}
