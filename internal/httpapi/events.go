package httpapi

import (
	"encoding/json"
	"net/http"
	"strconv"
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
	// eventsWriteTimeout bounds one write to a reader.
	eventsWriteTimeout = 30 * time.Second
	// eventsBatch is how many events are written between two flushes.
	eventsBatch = 256
	// maxEventFilters bounds the queues and kinds one stream may name.
	maxEventFilters = 100
)

// The control events of a stream, which carry no job.
const (
	// eventGap: the events between the resume point and the first one
	// sent are no longer kept.
	eventGap = "stream.gap"
	// eventDropped: the reader fell behind; the server ended the stream.
	eventDropped = "stream.dropped"
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
	f, resume, after, err := a.eventsQuery(r)
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
	sub, backlog, gap := a.engine.Events().Subscribe(f, resume, after, events.DefaultBuffer)
	defer sub.Close()

	rc := http.NewResponseController(w)
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	h.Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	out := eventWriter{w: w, rc: rc, last: after}
	if gap && len(backlog) > 0 {
		out.control(eventGap, map[string]any{"after": after, "first_id": backlog[0].ID,
			"message": "events after the resume point were no longer kept; the stream goes on from first_id"})
	}
	for i := range backlog {
		out.event(&backlog[i])
	}
	if !out.flush() {
		return
	}
	ping := time.NewTicker(eventsPing)
	defer ping.Stop()
	for {
		select {
		case ev, ok := <-sub.C():
			if !ok {
				if sub.Dropped() {
					out.control(eventDropped, map[string]any{"last_id": out.last,
						"message": "the reader fell behind the server; reconnect with Last-Event-ID to resume"})
					out.flush()
				}
				return
			}
			out.event(&ev)
		drain:
			for n := 1; n < eventsBatch; n++ {
				select {
				case more, ok := <-sub.C():
					if !ok {
						break drain
					}
					out.event(&more)
				default:
					break drain
				}
			}
			if !out.flush() {
				return
			}
		case <-ping.C:
			out.comment("ping")
			if !out.flush() {
				return
			}
		case <-r.Context().Done():
			return
		}
	}
}

// eventsQuery reads the filter and resume point of a stream: queue and
// kind (each repeatable), after or the Last-Event-ID header.
func (a *API) eventsQuery(r *http.Request) (f events.Filter, resume bool, after uint64, err error) {
	q := r.URL.Query()
	p := a.namespaced(r)
	for _, name := range []string{"queue", "kind"} {
		vals := q[name]
		if len(vals) > maxEventFilters {
			return f, false, 0, job.Invalid(name, "at most %d allowed", maxEventFilters)
		}
		for _, v := range vals {
			if !job.ValidName(v) {
				return f, false, 0, job.Invalid(name, "must be 1-%d characters of A-Za-z0-9_.:- starting with a letter or digit", job.MaxNameLength)
			}
			if name == "queue" && p != nil {
				if err := checkQueue(p, v, "queue"); err != nil {
					return f, false, 0, err
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
		return f, false, 0, job.Invalid("after", "must not be empty; leave the parameter out instead")
	}
	if from == "" {
		field, from = "Last-Event-ID", r.Header.Get("Last-Event-ID")
	}
	if from != "" {
		if after, err = strconv.ParseUint(from, 10, 64); err != nil {
			return f, false, 0, job.Invalid(field, "must be the id of an event: a whole number")
		}
		resume = true
	}
	return f, resume, after, nil
}

// eventWriter writes server-sent events, each write under its own
// deadline; after a failed write it writes nothing more.
type eventWriter struct {
	w      http.ResponseWriter
	rc     *http.ResponseController
	last   uint64
	failed bool
	buf    []byte
}

// event writes one job event.
func (o *eventWriter) event(ev *events.Event) {
	o.buf = append(o.buf, "id: "...)
	o.buf = strconv.AppendUint(o.buf, ev.ID, 10)
	o.buf = append(o.buf, "\nevent: "...)
	o.buf = append(o.buf, ev.Type...)
	o.buf = append(o.buf, "\ndata: "...)
	o.buf = wire.AppendEvent(o.buf, ev)
	o.buf = append(o.buf, "\n\n"...)
	o.last = ev.ID
}

// control writes a control event, which carries no id.
func (o *eventWriter) control(name string, v any) {
	data, err := json.Marshal(v)
	if err != nil {
		o.failed = true
		return
	}
	o.buf = append(o.buf, "event: "+name+"\ndata: "...)
	o.buf = append(o.buf, data...)
	o.buf = append(o.buf, "\n\n"...)
}

// comment writes a comment line, which readers ignore.
func (o *eventWriter) comment(text string) {
	o.buf = append(o.buf, ": "+text+"\n\n"...)
}

// flush sends what was written and reports whether the reader is still
// there.
func (o *eventWriter) flush() bool {
	if o.failed {
		return false
	}
	if len(o.buf) > 0 {
		_ = o.rc.SetWriteDeadline(time.Now().Add(eventsWriteTimeout))
		if _, err := o.w.Write(o.buf); err != nil {
			o.failed = true
			return false
		}
		o.buf = o.buf[:0]
	}
	if err := o.rc.Flush(); err != nil {
		o.failed = true
		return false
	}
	return true
}
