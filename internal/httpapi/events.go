package httpapi

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"sync"
	"time"

	"github.com/spoolq/spool/internal/events"
	"github.com/spoolq/spool/internal/httpapi/streamserver"
	"github.com/spoolq/spool/internal/httpapi/wire"
	"github.com/spoolq/spool/internal/job"
)

// Bounds of an event stream.
const (
	// DefaultMaxEventReaders bounds the event streams a node serves at
	// once unless Options say otherwise.
	DefaultMaxEventReaders = 256
	// eventsPing is the time between the comments that keep an idle
	// stream's connection open through proxies.
	eventsPing = 15 * time.Second
	// eventsWriteTimeout bounds one write to a reader: a reader whose
	// connection takes nothing for this long is disconnected.
	eventsWriteTimeout = 30 * time.Second
	// eventsChunk and eventsChunkBytes bound the events a stream copies
	// from the bus at a time: so many events, and past the first, so many
	// bytes of them (events.Event and its texts).
	eventsChunk      = 64
	eventsChunkBytes = 32 << 10
	// eventsFlushBytes is how much text a stream gathers before it writes,
	// when more events wait: a stream writes at most this plus one chunk
	// at a time, however long the backlog it resumes over.
	eventsFlushBytes = 32 << 10
	// maxEventFilters bounds the queues and kinds one stream may name.
	maxEventFilters = 100
)

// The control events of a stream, which carry no job.
const (
	// eventGap: the events between the resume point and the first one
	// sent are no longer kept, or the resume point is not of this run of
	// this node.
	eventGap = "stream.gap"
	// eventDropped: the reader fell behind; the server ended the stream.
	eventDropped = "stream.dropped"
)

// A stream holds buffers only while it copies and writes events: a
// stream that waits holds none, and one woken by events its filter does
// not pass takes a chunk from eventChunks and gives it back at once.
var (
	// eventChunks holds the chunks streams copy events into from the bus
	// (*[]events.Event, of capacity eventsChunk).
	eventChunks = sync.Pool{New: func() any {
		chunk := make([]events.Event, 0, eventsChunk)
		return &chunk
	}}
	// eventBufs holds the buffers streams write their text in (*[]byte).
	eventBufs = sync.Pool{New: func() any {
		buf := make([]byte, 0, 4<<10)
		return &buf
	}}
)

// events serves GET /v1/events: the job events the engine publishes
// (events.Event) as server-sent events, filtered by queue and kind and
// cut to the token's namespaces, from after the Last-Event-ID header (or
// the after parameter) when given, else from now. At most
// Options.MaxEventReaders streams run at once; one more is answered 503.
func (a *API) events(w http.ResponseWriter, r *http.Request) {
	if streamserver.InFrame(r.Context()) {
		a.writeError(w, r, newError(CodeInvalidArgument, "", "GET /v1/events streams; it cannot be called inside a stream"))
		return
	}
	f, resume, after, afterText, err := a.eventsQuery(r)
	if err != nil {
		a.writeError(w, r, err)
		return
	}
	select {
	case a.eventReaders <- struct{}{}:
		defer func() { <-a.eventReaders }()
	default:
		a.writeError(w, r, newError(CodeUnavailable, "", "this node already serves %d event streams, its most (--max-event-readers); retry later",
			cap(a.eventReaders)))
		return
	}
	rd, gap := a.engine.Events().Follow(f, resume, after)

	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	h.Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	out := eventWriter{w: w, rc: http.NewResponseController(w), last: rd.Position()}
	defer out.release()
	if gap {
		out.control(eventGap, map[string]any{"after": afterText, "first_id": events.ID{Bus: out.last.Bus, Seq: out.last.Seq + 1},
			"message": "events after the resume point are not kept by this node; the stream goes on from first_id"})
	}
	out.follow(r.Context(), rd)
}

// follow writes what rd reads until the reader leaves, falls behind the
// ring (stream.dropped) or the bus closes: a chunk at a time, writing once
// eventsFlushBytes gather or the reader has caught up, then waiting for
// the bus to wake it, with a ping every eventsPing.
func (o *eventWriter) follow(ctx context.Context, rd *events.Reader) {
	ping := time.NewTicker(eventsPing)
	defer ping.Stop()
	for {
		chunk := eventChunks.Get().(*[]events.Event)
		evs, wait, err := rd.Read(*chunk, eventsChunkBytes)
		for i := range evs {
			o.event(&evs[i])
		}
		clear(evs) // the pool must not keep the ring's texts
		eventChunks.Put(chunk)
		switch {
		case errors.Is(err, events.ErrBehind):
			o.control(eventDropped, map[string]any{"last_id": o.last,
				"message": "the reader fell behind the server; reconnect with Last-Event-ID to resume"})
			o.flush()
			return
		case errors.Is(err, events.ErrClosed):
			o.flush()
			return
		}
		if wait == nil && o.buffered() < eventsFlushBytes {
			continue
		}
		if !o.flush() {
			return
		}
		if wait == nil {
			continue
		}
		o.release()
		select {
		case <-wait:
		case <-ping.C:
			o.comment("ping")
			if !o.flush() {
				return
			}
		case <-ctx.Done():
			return
		}
	}
}

// eventsQuery reads the filter and resume point of a stream: queue and
// kind (each repeatable), after or the Last-Event-ID header (as sent).
func (a *API) eventsQuery(r *http.Request) (f events.Filter, resume bool, after events.ID, afterText string, err error) {
	q := r.URL.Query()
	p := a.namespaced(r)
	for _, name := range []string{"queue", "kind"} {
		vals := q[name]
		if len(vals) > maxEventFilters {
			return f, false, after, "", job.Invalid(name, "at most %d allowed", maxEventFilters)
		}
		for _, v := range vals {
			if !job.ValidName(v) {
				return f, false, after, "", job.Invalid(name, "must be 1-%d characters of A-Za-z0-9_.:- starting with a letter or digit", job.MaxNameLength)
			}
			if name == "queue" && p != nil {
				if err := checkQueue(p, v, "queue"); err != nil {
					return f, false, after, "", err
				}
			}
		}
	}
	f.Queues, f.Kinds = q["queue"], q["kind"]
	if p != nil {
		f.Allow = p.AllowsQueue
	}
	field, from := "after", q.Get("after")
	if from == "" && q.Has("after") {
		return f, false, after, "", job.Invalid("after", "must not be empty; leave the parameter out instead")
	}
	if from == "" {
		field, from = "Last-Event-ID", r.Header.Get("Last-Event-ID")
	}
	if from == "" {
		return f, false, after, "", nil
	}
	if after, err = events.ParseID(from); err != nil {
		return f, false, after, "", job.Invalid(field, "must be the id of an event, as an event's id gives it, or 0")
	}
	return f, true, after, from, nil
}

// eventWriter writes server-sent events, each write under its own
// deadline; after a failed write it writes nothing more. It holds a
// buffer (from eventBufs) only while it has text to write.
type eventWriter struct {
	w      http.ResponseWriter
	rc     *http.ResponseController
	last   events.ID // the last event written, or the stream's start
	failed bool
	sent   bool // the answer's head has been flushed
	buf    *[]byte
}

// text is the writer's buffer, taken from the pool when it has none.
func (o *eventWriter) text() *[]byte {
	if o.buf == nil {
		o.buf = eventBufs.Get().(*[]byte)
	}
	return o.buf
}

// buffered is how many bytes wait to be written.
func (o *eventWriter) buffered() int {
	if o.buf == nil {
		return 0
	}
	return len(*o.buf)
}

// release gives the buffer back, dropping what it holds (one that grew
// past its bound is left to the collector).
func (o *eventWriter) release() {
	if o.buf == nil {
		return
	}
	if cap(*o.buf) <= 4*eventsFlushBytes {
		*o.buf = (*o.buf)[:0]
		eventBufs.Put(o.buf)
	}
	o.buf = nil
}

// event writes one job event.
func (o *eventWriter) event(ev *events.Event) {
	p := o.text()
	b := append(*p, "id: "...)
	b, _ = ev.ID.AppendText(b)
	b = append(b, "\nevent: "...)
	b = append(b, ev.Type...)
	b = append(b, "\ndata: "...)
	b = wire.AppendEvent(b, ev)
	*p = append(b, "\n\n"...)
	o.last = ev.ID
}

// control writes a control event, which carries no id.
func (o *eventWriter) control(name string, v any) {
	data, err := json.Marshal(v)
	if err != nil {
		o.failed = true
		return
	}
	p := o.text()
	b := append(*p, "event: "+name+"\ndata: "...)
	b = append(b, data...)
	*p = append(b, "\n\n"...)
}

// comment writes a comment line, which readers ignore.
func (o *eventWriter) comment(text string) {
	p := o.text()
	*p = append(*p, ": "+text+"\n\n"...)
}

// flush sends what was written and reports whether the reader is still
// there.
func (o *eventWriter) flush() bool {
	if o.failed {
		return false
	}
	if o.buffered() == 0 && o.sent {
		return true
	}
	if o.buffered() > 0 {
		_ = o.rc.SetWriteDeadline(time.Now().Add(eventsWriteTimeout))
		if _, err := o.w.Write(*o.buf); err != nil {
			o.failed = true
			return false
		}
		*o.buf = (*o.buf)[:0]
	}
	if err := o.rc.Flush(); err != nil {
		o.failed = true
		return false
	}
	o.sent = true
	return true
}
