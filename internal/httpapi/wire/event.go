package wire

import (
	"strconv"

	"github.com/spoolq/spool/internal/events"
)

// AppendEvent appends ev as the JSON object of the data of a server-sent
// event (GET /v1/events), the fields encoding/json writes from
// events.Event's tags, in their order, without reflection: a reader of
// every event gets three a job, and encoding each through encoding/json
// cost the server more than the rest of the event's way.
func AppendEvent(b []byte, ev *events.Event) []byte {
	b = append(b, `{"id":"`...)
	b, _ = ev.ID.AppendText(b)
	b = append(b, `","type":`...)
	b = appendString(b, string(ev.Type))
	b = append(b, `,"at":`...)
	b = appendTime(b, ev.At)
	b = append(b, `,"job_id":`...)
	b = appendString(b, ev.Job)
	b = append(b, `,"queue":`...)
	b = appendString(b, ev.Queue)
	for _, f := range [...]struct{ key, value string }{
		{`,"consumer_group":`, ev.ConsumerGroup}, {`,"kind":`, ev.Kind}, {`,"state":`, string(ev.State)},
	} {
		if f.value != "" {
			b = append(b, f.key...)
			b = appendString(b, f.value)
		}
	}
	if ev.Attempt != 0 {
		b = append(b, `,"attempt":`...)
		b = strconv.AppendInt(b, int64(ev.Attempt), 10)
	}
	for _, f := range [...]struct{ key, value string }{{`,"worker":`, ev.Worker}, {`,"error":`, ev.Error}} {
		if f.value != "" {
			b = append(b, f.key...)
			b = appendString(b, f.value)
		}
	}
	return append(b, '}')
}
