package wire

import (
	"testing"

	"github.com/spoolq/spool/internal/job"
)

// An inexact, repeated or null key is refused, naming its field by its
// full path.
func TestExactKeys(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		body  string
		field string // "" when the body passes
	}{
		{`{"kind":"k","queue":"q"}`, ""},
		{`{"kind":"k","payload":{"Kind":null,"X":[null,{"Y":1}]}}`, ""},
		{`{"items":[{"id":"a","token":1,"result":{"A":null}}]}`, ""},
		{`{"token":1,"progress":null}`, ""},
		{`{"Kind":"k"}`, "Kind"},
		{`{"kind":"k","backoff":{"Type":"fixed"}}`, "backoff.Type"},
		{`{"\u212aind":"k"}`, "\u212aind"},
		{`{"k\u0069nd":"k"}`, ""},
		{`{"kind":null}`, "kind"},
		{`{"jobs":[{"kind":"k"},null]}`, "jobs[1]"},
		{`{"backoff":{"type":null}}`, "backoff.type"},
		{`{"tags":["a",null]}`, "tags[1]"},
		{`{"kind":"not null, n"}`, ""},
		{`{"kind":"a","kind":"b"}`, "kind"},
		{`{"kind":"a","k\u0069nd":"b"}`, "kind"},
		{`{"jobs":[{"kind":"a"},{"kind":"b"}]}`, ""},
		{`{"jobs":[{"kind":"a","payload":{"x":1,"x":2}}]}`, ""},
		{`{"backoff":{"type":"fixed"},"kind":"k","backoff":{}}`, "backoff"},
		{`{"jobs":[{"kind":"a"},{"kind":"b","kind":"c"}]}`, "jobs[1].kind"},
		{`{"rate":{"limit":1,"limit":2}}`, "rate.limit"},
		{`{"rate":{"limit":1,"Limit":2}}`, "rate.Limit"},
		{`{"jobs":[{"kind":"a","backoff":{"base_ms":null}}]}`, "jobs[0].backoff.base_ms"},
	} {
		err := exactKeys([]byte(c.body))
		switch {
		case c.field == "" && err != nil:
			t.Errorf("%s: %v, want no error", c.body, err)
		case c.field != "":
			e, ok := err.(*InvalidJSONError)
			if !ok || e.Field != c.field {
				t.Errorf("%s: %v, want invalid_json on field %q", c.body, err, c.field)
			}
		}
	}
}

// Half of a UTF-16 surrogate pair in a string value is refused, naming the
// value's field with its batch index; a whole pair, other escapes, the
// caller's own JSON and the free text of an error pass.
func TestLoneSurrogates(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		body  string
		field string // "" when the body passes
	}{
		{`{"unique_key":"\ud800"}`, "unique_key"},
		{`{"unique_key":"\udfff"}`, "unique_key"},
		{`{"unique_key":"a\uDBFFb"}`, "unique_key"},
		{`{"unique_key":"\ud800\u0041"}`, "unique_key"},
		{`{"unique_key":"\udc00\ud800"}`, "unique_key"},
		{`{"unique_key":"\ud83d\ude00"}`, ""},
		{`{"unique_key":"\\ud800"}`, ""},
		{`{"unique_key":"\"\u00e9\n"}`, ""},
		{`{"payload":{"x":"\ud800"},"kind":"k"}`, ""},
		{`{"jobs":[{"kind":"k"},{"kind":"k","unique_key":"\ud800"}]}`, "jobs[1].unique_key"},
		{`{"jobs":[{"kind":"k","payload":[1,2,{"a":"b"}]},{"tags":["a","\udc01"]}]}`, "jobs[1].tags[1]"},
		{`{"items":[{"id":"a","error":"\ud800"}]}`, ""},
		{`{"queues":["a","\ud800"]}`, "queues[1]"},
	} {
		err := exactKeys([]byte(c.body))
		switch {
		case c.field == "" && err != nil:
			t.Errorf("%s: %v, want no error", c.body, err)
		case c.field != "":
			e, ok := err.(*job.InputError)
			if !ok || e.Field != c.field {
				t.Errorf("%s: %v, want invalid_argument on field %q", c.body, err, c.field)
			}
		}
	}
}
