package dashboard_test

import (
	"fmt"
	"strings"
	"testing"
)

// A job whose error history dropped errors to stay within its bounds says
// on its page how many, right after its first error.
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
	if got := tb.count("ol.errors li"); got != 21+1 {
		t.Errorf("%d entries in the list of errors, want the 21 kept and the line of those dropped", got)
	}
	if got := tb.text(`ol.errors li:nth-child(2)`); !strings.Contains(got, "4 more errors not kept") {
		t.Errorf("second entry %q, want the count of the errors dropped", got)
	}
	if got := tb.text(`ol.errors li:first-child`); !strings.Contains(got, "failure 1") {
		t.Errorf("first entry %q, want the first failure", got)
	}
}
