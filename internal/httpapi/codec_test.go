package httpapi

import (
	"strings"
	"testing"
	"unicode/utf8"
)

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
		{`{"kind":"k","backoff":{"Type":"fixed"}}`, "Type"},
		{`{"\u212aind":"k"}`, "\u212aind"},
		{`{"k\u0069nd":"k"}`, ""},
		{`{"kind":null}`, "kind"},
		{`{"jobs":[{"kind":"k"},null]}`, "jobs"},
		{`{"backoff":{"type":null}}`, "type"},
		{`{"tags":["a",null]}`, "tags"},
		{`{"kind":"not null, n"}`, ""},
		{`{"kind":"a","kind":"b"}`, "kind"},
		{`{"kind":"a","k\u0069nd":"b"}`, "kind"},
		{`{"jobs":[{"kind":"a"},{"kind":"b"}]}`, ""},
		{`{"jobs":[{"kind":"a","payload":{"x":1,"x":2}}]}`, ""},
		{`{"backoff":{"type":"fixed"},"kind":"k","backoff":{}}`, "backoff"},
	} {
		err := exactKeys([]byte(c.body))
		switch {
		case c.field == "" && err != nil:
			t.Errorf("%s: %v, want no error", c.body, err)
		case c.field != "":
			e, ok := err.(*apiError)
			if !ok || e.Code != CodeInvalidJSON || e.Field != c.field {
				t.Errorf("%s: %v, want invalid_json on field %q", c.body, err, c.field)
			}
		}
	}
}

func TestCutUTF8(t *testing.T) {
	t.Parallel()
	s := strings.Repeat("é", 10) // 2 bytes each
	for n := 0; n <= len(s)+1; n++ {
		got := cutUTF8(s, n)
		if len(got) > n || !utf8.ValidString(got) || len(got) < n-1 {
			t.Errorf("cutUTF8(%d): %d bytes, valid %v", n, len(got), utf8.ValidString(got))
		}
	}
}
