package dashboard

import (
	"bytes"
	"encoding/json"
	"html/template"
	"strings"
	"testing"
	"time"
)

// escaped is s as html/template writes it in text.
func escaped(t testing.TB, s string) string {
	t.Helper()
	var buf bytes.Buffer
	if err := template.Must(template.New("").Parse("{{.}}")).Execute(&buf, s); err != nil {
		t.Fatal(err)
	}
	return buf.String()
}

// checkShown holds a view of raw to its bounds: at most max bytes once
// escaped, and, when nothing was left out, the whole value.
func checkShown(t testing.TB, raw string, got shown, max int) {
	t.Helper()
	if n := len(escaped(t, got.Text)); n > max {
		t.Fatalf("shown text escapes to %d bytes, more than %d", n, max)
	}
	if got.More < 0 || got.More > len(raw) {
		t.Fatalf("More = %d of %d bytes", got.More, len(raw))
	}
	if got.More > 0 || !json.Valid([]byte(raw)) {
		return
	}
	var want, have bytes.Buffer
	if err := json.Compact(&want, []byte(raw)); err != nil {
		t.Fatal(err)
	}
	if err := json.Compact(&have, []byte(got.Text)); err != nil {
		t.Fatalf("shown text %q is not the JSON value: %v", got.Text, err)
	}
	if have.String() != want.String() {
		t.Fatalf("shown text %q is not the value %q", have.String(), want.String())
	}
}

// A value within the bounds is shown as json.Indent shows it.
func TestPrettyJSONIndentsAsTheStandardLibrary(t *testing.T) {
	for _, raw := range []string{
		`{"user":"ada","tags":["a","b"],"n":1.5e3,"ok":true,"none":null}`,
		` [ 1 , {} , [ ] , { "a" : [ { } ] } , "x\"y\\\\" ] `,
		`"<script>"`, `42`, `{"é":"日本","\u0000":"\ud83d\ude00"}`,
	} {
		var want bytes.Buffer
		if err := json.Indent(&want, []byte(strings.TrimSpace(raw)), "", "  "); err != nil {
			t.Fatal(err)
		}
		if got := prettyJSON(json.RawMessage(raw)); got.Text != want.String() || got.More != 0 {
			t.Errorf("prettyJSON(%s) = %q (%d more), want %q", raw, got.Text, got.More, want.String())
		}
	}
}

// Past maxShownDepth a value is compact on its container's line: the
// indentation stops growing however deep the value goes.
func TestPrettyJSONIndentsToADepth(t *testing.T) {
	deep := strings.Repeat(`{"a":[`, 500) + `1` + strings.Repeat(`]}`, 500)
	got := prettyJSON(json.RawMessage(deep))
	checkShown(t, deep, got, maxShownJSON)
	for _, line := range strings.Split(got.Text, "\n") {
		if pad := len(line) - len(strings.TrimLeft(line, " ")); pad > 2*maxShownDepth {
			t.Fatalf("a line indented %d spaces: %q", pad, line[:min(len(line), 80)])
		}
	}
	if !strings.Contains(got.Text, `[{"a":[{"a":[`) {
		t.Errorf("the deep part is not compact: %q", got.Text[:min(len(got.Text), 400)])
	}
}

// A value past the bound is cut, with the bytes left out counted; the
// cost is linear in the input however it nests, and small.
func TestPrettyJSONCutsAtTheBound(t *testing.T) {
	cases := map[string]string{
		"deep":   strings.Repeat("[", 9990) + strings.Repeat("]", 9990),
		"wide":   `{` + strings.Repeat(`"k":"<&>",`, 100_000) + `"k":0}`,
		"string": `"` + strings.Repeat(`\"`, 200_000) + `"`,
		"long":   strings.Repeat(" ", 100) + `[` + strings.Repeat(`123456789,`, 200_000) + `0]`,
		"text":   strings.Repeat("not json ", 100_000),
		"deeper": strings.Repeat("[", 20_000) + strings.Repeat("]", 20_000), // past encoding/json's depth
	}
	for name, raw := range cases {
		start := time.Now()
		got := prettyJSON(json.RawMessage(raw))
		if took := time.Since(start); took > 5*time.Second {
			t.Errorf("%s: took %v", name, took)
		}
		checkShown(t, raw, got, maxShownJSON)
		if name != "deep" && got.More == 0 {
			t.Errorf("%s: nothing left out of %d bytes", name, len(raw))
		}
	}
}

// clip cuts on a character boundary, counting escaped bytes.
func TestClip(t *testing.T) {
	got := clip(11, "<<é€")
	if got.Text != "<<é" || got.More != 3 {
		t.Errorf("clip = %+v, want <<é and 3 more", got)
	}
	if got := clip(100, "short"); got.Text != "short" || got.More != 0 {
		t.Errorf("clip = %+v", got)
	}
	bad := string([]byte{0xff, 0xfe, 'a'})
	checkShown(t, bad, clip(4, bad), 4)
}

// FuzzPrettyJSON: whatever the input, the shown text keeps to its bound
// and, when whole, is the value.
func FuzzPrettyJSON(f *testing.F) {
	for _, seed := range []string{`{"a":[1,2,{"b":null}]}`, `[[[[[[[[[[[[[[[[[[[[[]]]]]]]]]]]]]]]]]]]]`, `"\u003c"`, `{} `, `nope`, ``} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		checkShown(t, raw, prettyJSON(json.RawMessage(raw)), maxShownJSON)
		checkShown(t, raw, clip(64, raw), 64)
	})
}
