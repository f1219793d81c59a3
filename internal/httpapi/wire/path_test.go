package wire

import (
	"encoding/json"
	"testing"
	"time"
)

// pathInner, pathEmbedded and pathBody are shapes of the bodies the API
// reads: nested objects, arrays of them, maps, embedded fields, free
// JSON and values that decode themselves.
type pathInner struct {
	Limit *int       `json:"limit"`
	At    *time.Time `json:"at"`
}

type PathEmbedded struct {
	Note string `json:"note"`
}

type pathBody struct {
	PathEmbedded
	Rate    *pathInner           `json:"rate"`
	Items   []pathInner          `json:"items"`
	Grid    [][]int              `json:"grid"`
	ByName  map[string]pathInner `json:"by_name"`
	Payload json.RawMessage      `json:"payload"`
	Kind    string               `json:"kind"`
}

// Every error of a body names the field at fault by its full path.
func TestDecodeNamesNestedFields(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		body, field string
	}{
		{`{"rate":{"limit":1,"x":1}}`, "rate.x"},
		{`{"kind":"k","items":[{"limit":1},{"limit":2,"y":{"z":1}}]}`, "items[1].y"},
		{`{"by_name":{"a":{"limit":1},"b":{"w":1}}}`, "by_name.b.w"},
		{`{"payload":{"x":{"y":1}},"note":"n","q":1}`, "q"},
		{`{"rate":{"limit":"1"}}`, "rate.limit"},
		{`{"items":[{"limit":1},{"limit":true}]}`, "items[1].limit"},
		{`{"items":[{"limit":1},7]}`, "items[1]"},
		{`{"grid":[[1,2],[3,"4"]]}`, "grid[1][1]"},
		{`{"grid":[[1,2],{"a":1}]}`, "grid[1]"},
		{`{"by_name":{"a":{"limit":[1]}}}`, "by_name.a.limit"},
		{`{"rate":7}`, "rate"},
		{`{"items":[{"at":"2026-11-24T00:00:00Z"},{"at":"soon"}]}`, "items[1].at"},
		{`{"by_name":{"k":{"at":5}}}`, "by_name.k.at"},
		{`{"note":5}`, "note"},
		{`{"NOTE":"n","kind":"k","rate":{"Limit":1}}`, "NOTE"},
		{`{"kind":"k","rate":{"Limit":1}}`, "rate.Limit"},
	} {
		var dst pathBody
		err := DecodeJSON([]byte(c.body), &dst)
		e, ok := err.(*InvalidJSONError)
		if !ok || e.Field != c.field {
			t.Errorf("%s: %v, want invalid_json on field %q", c.body, err, c.field)
		}
	}
}
