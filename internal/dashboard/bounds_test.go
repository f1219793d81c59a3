package dashboard_test

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"
)

// Bounds the render tests hold every page to, whatever the shape of the
// jobs' data: a page of at most maxPageBytes, answered well within
// maxRenderTime (loose, so that a loaded machine does not fail it; the
// unbounded renders took seconds and hundreds of MiB).
const (
	maxPageBytes  = 256 << 10
	maxRenderTime = 10 * time.Second
)

// page GETs a dashboard path over HTTP (auth off) and returns its body,
// failing unless it answers 200 within maxRenderTime and maxPageBytes.
func (b *bundle) page(path string) string {
	b.t.Helper()
	start := time.Now()
	resp, err := http.Get(b.base + path)
	if err != nil {
		b.t.Fatalf("GET %s: %v", path, err)
	}
	defer resp.Body.Close()
	// Read one byte past the bound, so that an unbounded page costs the
	// test no more than that.
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxPageBytes+1))
	if err != nil {
		b.t.Fatalf("GET %s: %v", path, err)
	}
	took := time.Since(start)
	if resp.StatusCode != http.StatusOK {
		b.t.Fatalf("GET %s: status %d", path, resp.StatusCode)
	}
	if len(body) > maxPageBytes {
		b.t.Errorf("GET %s: more than %d bytes", path, maxPageBytes)
	}
	if took > maxRenderTime {
		b.t.Errorf("GET %s took %v, want well under %v", path, took, maxRenderTime)
	}
	return string(body)
}

// deepJSON is an array nested n levels deep around a value.
func deepJSON(n int, inner string) json.RawMessage {
	return json.RawMessage(strings.Repeat("[", n) + inner + strings.Repeat("]", n))
}

// TestJobPageBoundedDeepPayload: a payload nested 9,990 levels deep (20
// KB) and a progress report as deep give a small job page and a small
// live fragment, with the start of the value shown indented and the rest
// compact.
func TestJobPageBoundedDeepPayload(t *testing.T) {
	b := setup(t)
	deep := deepJSON(9990, `"<script>alert(1)</script>"`)
	id := b.enqueue(obj{"queue": "deep", "kind": "k", "payload": deep})
	body := b.page("/ui/jobs/" + id)
	if !strings.Contains(body, "[\n  [\n    [\n") {
		t.Errorf("the payload's start is not shown indented")
	}
	if strings.Contains(body, "<script>alert") || !strings.Contains(body, "&lt;script&gt;alert(1)&lt;/script&gt;") {
		t.Errorf("the payload's text is not shown escaped")
	}

	jobs := b.fetch("deep", 1)
	b.must(200, "POST", "/v1/jobs/"+jobs[0].ID+"/progress", obj{"token": jobs[0].Token, "progress": deepJSON(9990, `{"pct":50}`)})
	live := b.page("/ui/jobs/" + id + "?part=live")
	if !strings.Contains(live, `data-field="progress"`) || !strings.Contains(live, "&#34;pct&#34;:50") {
		t.Errorf("the live fragment does not show the progress")
	}
	b.page("/ui/jobs/" + id)
	b.page("/ui/queues/deep")
	b.page("/")
}

// TestJobPageBoundedWidePayload: a payload of a megabyte of keys, a
// result and progress as wide, and failed attempts with errors of the
// largest size give a job page cut at a bound, which says how much it
// left out and where to read all of it.
func TestJobPageBoundedWidePayload(t *testing.T) {
	b := setup(t)
	var sb strings.Builder
	sb.WriteString(`{`)
	for i := 0; sb.Len() < 1000_000; i++ {
		if i > 0 {
			sb.WriteString(",")
		}
		fmt.Fprintf(&sb, `"k%06d":"<b>&'+%d"`, i, i)
	}
	sb.WriteString(`}`)
	wide := json.RawMessage(sb.String())
	id := b.enqueue(obj{"queue": "wide", "kind": "k", "payload": wide, "max_attempts": 4})
	for attempt := range 3 {
		jobs := b.fetch("wide", 1)
		if len(jobs) != 1 {
			t.Fatalf("attempt %d: no job to fetch", attempt+1)
		}
		b.must(200, "POST", "/v1/jobs/"+id+"/progress", obj{"token": jobs[0].Token, "progress": wide})
		msg := strings.Repeat(`<img src=x onerror="alert(1)">`, 64<<10/30)
		b.must(200, "POST", "/v1/jobs/"+id+"/fail", obj{"token": jobs[0].Token, "error": msg, "retry_after_ms": 1})
		b.waitState(id, "available")
	}
	jobs := b.fetch("wide", 1)
	b.must(200, "POST", "/v1/jobs/"+id+"/ack", obj{"token": jobs[0].Token, "result": wide})

	body := b.page("/ui/jobs/" + id)
	if strings.Contains(body, "<b>") || strings.Contains(body, "<img") {
		t.Errorf("user data became markup")
	}
	if !strings.Contains(body, "\n  &#34;k000000&#34;: &#34;&lt;b&gt;&amp;&#39;&#43;0&#34;,\n") {
		t.Errorf("the payload's first key is not shown indented and escaped")
	}
	note := "more bytes not shown; <code>GET /v1/jobs/" + id + "</code> has it all"
	if n := strings.Count(body, note); n < 3 {
		t.Errorf("%d notes of text left out, want one for each of the payload, result and progress at least", n)
	}
	live := b.page("/ui/jobs/" + id + "?part=live")
	if !strings.Contains(live, note) {
		t.Errorf("the live fragment does not say what it left out")
	}
	b.page("/ui/queues/wide")
	b.page("/ui/queues/wide?q=k000001")
	b.page("/ui/dead")
}

// waitState polls the API until job id is in state, for at most ten
// seconds.
func (b *bundle) waitState(id, state string) {
	b.t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for b.state(id) != state {
		if time.Now().After(deadline) {
			b.t.Fatalf("job %s: still %s, want %s", id, b.state(id), state)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestQueuePageBoundsItsGroups: the queue page lists at most a page of
// its consumer groups, and says there are more.
func TestQueuePageBoundsItsGroups(t *testing.T) {
	b := setup(t)
	b.enqueue(obj{"queue": "fan", "kind": "k"})
	for i := range 105 {
		b.must(201, "PUT", fmt.Sprintf("/v1/queues/fan/consumer-groups/g%03d", i), obj{"start": "new"})
	}
	body := b.page("/ui/queues/fan")
	if n := strings.Count(body, `<tr data-consumer-group="`); n != 100 {
		t.Errorf("%d consumer groups listed, want 100", n)
	}
	if !strings.Contains(body, `<tr data-consumer-group="g000">`) || strings.Contains(body, `<tr data-consumer-group="g100">`) {
		t.Error("the listed consumer groups are not the first 100 by name")
	}
	if !strings.Contains(body, "data-more-consumer-groups") {
		t.Error("the page does not say there are more consumer groups")
	}
}
