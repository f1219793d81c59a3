package main

import (
	"strings"
	"testing"
)

func TestPrintTableShowsMediansPerSystemAndWorkload(t *testing.T) {
	in := strings.Join([]string{
		`compare: building (not a result line)`,
		`{"system":"spool","case":"seq","rep":1,"jobs_per_s":1000}`,
		`{"system":"asynq","case":"seq","rep":1,"jobs_per_s":700}`,
		`{"system":"spool","case":"seq","rep":2,"jobs_per_s":3000}`,
		`{"system":"spool","case":"seq","rep":3,"jobs_per_s":1500.4}`,
		`{"system":"asynq","case":"bulk","rep":1,"na":true}`,
		`{"system":"spool","case":"bulk","rep":1,"error":"timed out"}`,
		`{"system":"spool","case":"drain50","rep":1,"jobs_per_s":20000}`,
		`{"system":"spool","case":"drain50","rep":2,"error":"timed out"}`,
		`{"system":"spool","case":"lat","rep":1,"p50_ms":1.5,"p99_ms":12.25}`,
		`{"system":"spool","case":"lat","rep":2,"p50_ms":0.5,"p99_ms":250}`,
	}, "\n")
	var out strings.Builder
	if err := printTable(strings.NewReader(in), &out); err != nil {
		t.Fatal(err)
	}
	want := []string{
		"| workload | spool | asynq |",
		"| enqueue, 1 producer (jobs/s) | 1,500 | 700 |",
		"| bulk, 1,000 a call (jobs/s) | error | n/a |",
		"| drain, 50 handlers (jobs/s) | 20,000 (1 of 2 failed) | — |",
		"| latency at 1,000 jobs/s, p50 / p99 (ms) | 1.00 / 131 | — |",
	}
	for _, line := range want {
		if !strings.Contains(out.String(), line+"\n") {
			t.Errorf("table lacks %q:\n%s", line, out.String())
		}
	}
}
