package dashboard_test

import (
	"fmt"
	"strings"
	"testing"
)

// A job whose error history dropped errors to stay within its bounds says
// on its page how many, beside the count of earlier attempts not listed.
func TestJobPageSaysHowManyErrorsWereDropped(t *testing.T) {
	b := setup(t)
	id := b.enqueue(obj{"queue": "flaky", "kind": "k", "max_attempts": 5})
	const failures = 25
	for i := 1; i <= failures; i++ {
		jobs := b.fetch("flaky", 1)
		if len(jobs) != 1 || jobs[0].ID != id {
			t.Fatalf("fetch %d got %v, want %s", i, jobs, id)
		}
		b.must(200, "POST", "/v1/jobs/"+id+"/fail", obj{"token": jobs[0].Token, "error": fmt.Sprintf("failure %d", i), "no_retry": true})
		b.must(200, "POST", "/v1/jobs/"+id+"/retry", nil)
	}
	tb := b.open()
	tb.visit("/ui/jobs/" + id)
	if got := tb.count("ol.errors li"); got != 10 {
		t.Errorf("%d entries in the list of errors, want the latest 10", got)
	}
	if got := tb.text(`ol.errors li:last-child`); !strings.Contains(got, "failure 25") {
		t.Errorf("last entry %q, want the latest failure", got)
	}
	// 25 failures: the job keeps the first and the latest 20 (4 dropped);
	// the page lists 10 of the 21, so 15 earlier ones are not listed.
	note := tb.text(`[data-earlier]`)
	if !strings.Contains(note, "15 earlier failed attempts are not listed") || !strings.Contains(note, "4 errors were not kept") {
		t.Errorf("note %q, want 15 earlier attempts not listed, 4 of them not kept", note)
	}
}
