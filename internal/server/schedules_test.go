package server

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/spoolq/spool/internal/config"
	"github.com/spoolq/spool/internal/pgtest"
)

// tickJobs lists the jobs of queue (at most 1000) and returns the tick
// times of those whose ids are ticks of schedule name, sorted, with the
// ids of the others.
func tickJobs(t *testing.T, get func(path string) obj, queue, name string) (ticks []int64, other []string) {
	t.Helper()
	out := get("/v1/jobs?queue=" + queue + "&limit=1000")
	for _, j := range objs(out["jobs"]) {
		id := j["id"].(string)
		ms, ok := strings.CutPrefix(id, name+":")
		if !ok {
			other = append(other, id)
			continue
		}
		n, err := strconv.ParseInt(ms, 10, 64)
		if err != nil {
			t.Fatalf("job id %q: not a tick", id)
		}
		ticks = append(ticks, n)
	}
	sort.Slice(ticks, func(i, j int) bool { return ticks[i] < ticks[j] })
	return ticks, other
}

// wantEveryTick fails unless ticks are the ticks of an every-second
// schedule, once each, none missing between the first and the last.
func wantEveryTick(t *testing.T, ticks []int64) {
	t.Helper()
	for i := 1; i < len(ticks); i++ {
		if d := ticks[i] - ticks[i-1]; d != 1000 {
			t.Fatalf("ticks %v: %d ms between two jobs, want every second once (none missed, none doubled)", ticks, d)
		}
	}
	for _, tick := range ticks {
		if tick%1000 != 0 {
			t.Fatalf("tick %d is not a whole second since the epoch", tick)
		}
	}
}

// A schedule put over HTTP fires a job every second with its tick's id,
// on either store; paused, it fires nothing, and resumed with catch_up it
// fires the ticks it missed; a trigger fires one more at once.
func TestSchedulesFireOverHTTP(t *testing.T) {
	t.Parallel()
	for name, store := range stores() {
		t.Run(name, func(t *testing.T) {
			change := store(t)
			t.Parallel()
			b := setup(t, change...)
			get := func(path string) obj { return b.must(200, "GET", path, nil) }
			out := b.must(201, "PUT", "/v1/schedules/beat", obj{"every_ms": 1000, "misfire": "catch_up",
				"job": obj{"queue": "cron", "kind": "tick", "payload": obj{"n": 1}}})
			if out["name"] != "beat" || out["every_ms"] != float64(1000) || out["next_run_at"] == nil {
				t.Fatalf("put schedule: %v", out)
			}
			var ticks []int64
			b.waitFor("three ticks", 10*time.Second, func() bool {
				ticks, _ = tickJobs(t, get, "cron", "beat")
				return len(ticks) >= 3
			})
			wantEveryTick(t, ticks)
			s := get("/v1/schedules/beat")
			if s["last_job_id"] == nil || s["last_run_at"] == nil {
				t.Fatalf("schedule after firing: %v", s)
			}

			b.must(200, "POST", "/v1/schedules/beat/pause", nil)
			paused, _ := tickJobs(t, get, "cron", "beat")
			time.Sleep(2500 * time.Millisecond)
			if still, _ := tickJobs(t, get, "cron", "beat"); len(still) > len(paused)+1 {
				t.Fatalf("a paused schedule fired: %d ticks, then %d", len(paused), len(still))
			}
			trig := b.must(201, "POST", "/v1/schedules/beat/trigger", nil)
			trigID := trig["job"].(obj)["id"].(string)
			b.must(200, "POST", "/v1/schedules/beat/resume", nil)
			b.waitFor("the missed ticks to be caught up", 10*time.Second, func() bool {
				got, _ := tickJobs(t, get, "cron", "beat")
				return len(got) >= len(paused)+3
			})
			got, other := tickJobs(t, get, "cron", "beat")
			wantEveryTick(t, got)
			if len(other) != 1 || other[0] != trigID {
				t.Fatalf("jobs that are not ticks: %v, want only the triggered %s", other, trigID)
			}
			b.must(204, "DELETE", "/v1/schedules/beat", nil)
			code, _ := b.callAs("", "GET", "/v1/schedules/beat", "")
			if code != http.StatusNotFound {
				t.Fatalf("deleted schedule: %d", code)
			}
		})
	}
}

// Bad schedules get 400 naming the field and store nothing.
func TestSchedulesRefuseBadInput(t *testing.T) {
	t.Parallel()
	b := setup(t)
	for _, c := range []struct {
		body, code, field string
	}{
		{`{"job":{"kind":"k"}}`, "invalid_argument", "cron"},
		{`{"job":{"kind":"k"},"cron":"nope"}`, "invalid_argument", "cron"},
		{`{"job":{"kind":"k"},"cron":"@daily","timezone":"Mars/Base"}`, "invalid_argument", "timezone"},
		{`{"job":{"kind":"k"},"every_ms":10}`, "invalid_argument", "every_ms"},
		{`{"job":{"kind":"k"},"every_ms":60000,"cron":"@daily"}`, "invalid_argument", "every_ms"},
		{`{"job":{"kind":"k"},"every_ms":60000,"misfire":"later"}`, "invalid_argument", "misfire"},
		{`{"job":{"kind":"k"},"every_ms":60000,"max_catch_up":0}`, "invalid_argument", "max_catch_up"},
		{`{"every_ms":60000}`, "invalid_argument", "job"},
		{`{"job":{"queue":"q"},"every_ms":60000}`, "invalid_argument", "job.kind"},
		{`{"job":{"kind":"k","id":"x"},"every_ms":60000}`, "invalid_argument", "job.id"},
		{`{"job":{"kind":"k","run_at":"0001-01-01T00:00:00Z"},"every_ms":60000}`, "invalid_argument", "job.run_at"},
		{`{"job":{"kind":"k","kindd":1},"every_ms":60000}`, "invalid_json", "job.kindd"},
		{`{"job":{"kind":"k","priority":5000},"every_ms":60000}`, "invalid_argument", "job.priority"},
		{`{"job":{"kind":"k"},"every_ms":60000,"extra":1}`, "invalid_json", "extra"},
	} {
		code, body := b.callAs("", "PUT", "/v1/schedules/s", c.body)
		wantError(t, c.body, code, body, 400, c.code, c.field)
	}
	code, body := b.callAs("", "PUT", "/v1/schedules/-bad", `{"job":{"kind":"k"},"every_ms":60000}`)
	wantError(t, "bad name", code, body, 400, "invalid_argument", "name")
	if out := b.must(200, "GET", "/v1/schedules", nil); len(objs(out["schedules"])) != 0 {
		t.Fatalf("refused puts stored schedules: %v", out)
	}
}

// With catch_up, the ticks that pass while the server is down fire when it
// comes back, each once.
func TestSchedulesCatchUpAfterARestart(t *testing.T) {
	t.Parallel()
	b := setup(t)
	get := func(b *bundle) func(string) obj {
		return func(path string) obj { return b.must(200, "GET", path, nil) }
	}
	b.must(201, "PUT", "/v1/schedules/beat", obj{"every_ms": 1000, "misfire": "catch_up", "job": obj{"queue": "cron", "kind": "tick"}})
	b.waitFor("a tick", 10*time.Second, func() bool {
		ticks, _ := tickJobs(t, get(b), "cron", "beat")
		return len(ticks) >= 1
	})
	b.stop()
	down := time.Now()
	time.Sleep(3 * time.Second)
	b = start(t, b.cfg)
	b.waitFor("the ticks of the downtime", 10*time.Second, func() bool {
		ticks, _ := tickJobs(t, get(b), "cron", "beat")
		return len(ticks) > 0 && ticks[len(ticks)-1] >= down.Add(3*time.Second).UnixMilli()/1000*1000
	})
	ticks, _ := tickJobs(t, get(b), "cron", "beat")
	wantEveryTick(t, ticks)
}

// On PostgreSQL only the leader fires schedules; killing it with SIGKILL
// while a schedule ticks every second leaves, under catch_up, no tick
// missed and none fired twice.
func TestClusterScheduleSurvivesKilledLeader(t *testing.T) {
	t.Parallel()
	db := pgtest.Schema(t)
	ns := []*node{startNode(t, db), startNode(t, db), startNode(t, db)}
	lead := waitLeader(t, ns, 15*time.Second)
	code, out, err := put(ns[0].base, "/v1/schedules/beat", obj{"every_ms": 1000, "misfire": "catch_up",
		"job": obj{"queue": "cron", "kind": "tick"}})
	if err != nil || code != http.StatusCreated {
		t.Fatalf("put schedule: %d %v %v", code, out, err)
	}
	alive := func() *node {
		for _, n := range ns {
			select {
			case <-n.exited:
			default:
				return n
			}
		}
		t.Fatal("no node alive")
		return nil
	}
	get := func(path string) obj {
		t.Helper()
		code, out, err := getJSON(alive().base, path)
		if err != nil || code != http.StatusOK {
			t.Fatalf("GET %s: %d %v", path, code, err)
		}
		return out
	}
	waitTicks := func(what string, n int) []int64 {
		t.Helper()
		deadline := time.Now().Add(20 * time.Second)
		for {
			ticks, _ := tickJobs(t, get, "cron", "beat")
			if len(ticks) >= n {
				return ticks
			}
			if time.Now().After(deadline) {
				t.Fatalf("waiting for %s: %d ticks fired", what, len(ticks))
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	before := waitTicks("three ticks", 3)
	lead.kill()
	var rest []*node
	for _, n := range ns {
		if n != lead {
			rest = append(rest, n)
		}
	}
	ns = rest
	waitLeader(t, ns, 20*time.Second)
	ticks := waitTicks("ticks after the new leader", len(before)+5)
	wantEveryTick(t, ticks)
	if ticks[0] != before[0] {
		t.Fatalf("first tick %d, was %d", ticks[0], before[0])
	}
}

// put sends a JSON PUT to a node and decodes the answer.
func put(base, path string, body any) (int, obj, error) {
	req, err := http.NewRequest("PUT", "http://"+base+path, strings.NewReader(mustJSON(body)))
	if err != nil {
		return 0, nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	return doJSON(req)
}

// getJSON sends a GET to a node and decodes the answer.
func getJSON(base, path string) (int, obj, error) {
	req, err := http.NewRequest("GET", "http://"+base+path, nil)
	if err != nil {
		return 0, nil, err
	}
	return doJSON(req)
}

func doJSON(req *http.Request) (int, obj, error) {
	resp, err := httpc.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	var out obj
	if err := decodeJSON(resp.Body, &out); err != nil {
		return resp.StatusCode, nil, fmt.Errorf("decode answer: %w", err)
	}
	return resp.StatusCode, out, nil
}

func mustJSON(v any) string {
	data, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return string(data)
}

func decodeJSON(r io.Reader, v any) error { return json.NewDecoder(r).Decode(v) }

// Two hundred schedules that fire every second keep up, on either store:
// every tick of a five-second window enqueues its job, once, and none is
// skipped.
func TestSchedulesKeepUpWithManyEverySecond(t *testing.T) {
	t.Parallel()
	for name, store := range stores() {
		t.Run(name, func(t *testing.T) {
			change := store(t)
			t.Parallel()
			b := setup(t, change...)
			const n = 200
			for i := range n {
				b.must(201, "PUT", fmt.Sprintf("/v1/schedules/s-%03d", i), obj{"every_ms": 1000,
					"job": obj{"queue": "beat", "kind": "tick"}})
			}
			from := time.Now().Truncate(time.Second).Add(2 * time.Second)
			to := from.Add(4 * time.Second)
			deadline := to.Add(30 * time.Second)
			for handled := false; !handled; time.Sleep(200 * time.Millisecond) {
				if time.Now().After(deadline) {
					t.Fatalf("the schedules did not handle their ticks up to %v by %v", to, deadline)
				}
				handled = true
				for _, s := range objs(b.must(200, "GET", "/v1/schedules", nil)["schedules"]) {
					handled = handled && parseTime(t, s["next_run_at"]).After(to)
				}
			}
			fired := map[string][]int64{}
			for cursor := ""; ; {
				page := b.must(200, "GET", "/v1/jobs?queue=beat&limit=1000&cursor="+cursor, nil)
				for _, j := range objs(page["jobs"]) {
					name, ms, _ := strings.Cut(j["id"].(string), ":")
					tick, err := strconv.ParseInt(ms, 10, 64)
					if err != nil {
						t.Fatalf("job %v: not a tick's", j["id"])
					}
					if tick >= from.UnixMilli() && tick <= to.UnixMilli() {
						fired[name] = append(fired[name], tick)
					}
				}
				next, _ := page["next_cursor"].(string)
				if next == "" {
					break
				}
				cursor = next
			}
			missing := 0
			for i := range n {
				ticks := fired[fmt.Sprintf("s-%03d", i)]
				sort.Slice(ticks, func(a, b int) bool { return ticks[a] < ticks[b] })
				if len(ticks) != 5 {
					missing += 5 - len(ticks)
					continue
				}
				for k, tick := range ticks {
					if tick != from.Add(time.Duration(k)*time.Second).UnixMilli() {
						t.Fatalf("schedule s-%03d fired ticks %v in the window %v to %v", i, ticks, from, to)
					}
				}
			}
			if missing > 0 {
				t.Fatalf("%d of the %d ticks in the window enqueued no job", missing, 5*n)
			}
		})
	}
}

// Ticks that enqueue no job of their own, and ticks fired late, are
// logged and counted in /metrics, on either store: a schedule under skip
// that was paused for a few ticks skips all but the newest when resumed,
// and one under catch_up fires them late.
func TestScheduleTicksSkippedOrLateAreLoggedAndCounted(t *testing.T) {
	t.Parallel()
	for name, store := range stores() {
		t.Run(name, func(t *testing.T) {
			change := store(t)
			t.Parallel()
			cfg := config.Default()
			cfg.Addr, cfg.Data = "127.0.0.1:0", t.TempDir()
			for _, c := range change {
				c(&cfg)
			}
			srv, logs := startLogged(t, cfg)
			b := &bundle{t: t, srv: srv, cfg: cfg, base: "http://" + srv.Addr()}
			get := func(path string) obj { return b.must(200, "GET", path, nil) }
			for _, s := range []obj{{"name": "dropper", "misfire": "skip"}, {"name": "laggard", "misfire": "catch_up"}} {
				b.must(201, "PUT", "/v1/schedules/"+s["name"].(string), obj{"every_ms": 1000, "misfire": s["misfire"],
					"job": obj{"queue": "beat", "kind": "tick"}})
			}
			b.waitFor("a tick of each", 10*time.Second, func() bool {
				d, _ := tickJobs(t, get, "beat", "dropper")
				l, _ := tickJobs(t, get, "beat", "laggard")
				return len(d) > 0 && len(l) > 0
			})
			for _, s := range []string{"dropper", "laggard"} {
				b.must(200, "POST", "/v1/schedules/"+s+"/pause", nil)
			}
			time.Sleep(3500 * time.Millisecond)
			for _, s := range []string{"dropper", "laggard"} {
				b.must(200, "POST", "/v1/schedules/"+s+"/resume", nil)
			}
			var skipped, late float64
			b.waitFor("the ticks missed while paused to be counted", 10*time.Second, func() bool {
				fams := scrape(t, b.base, "")
				skipped = value(fams, "spool_schedule_ticks_skipped_total", map[string]string{})
				late = value(fams, "spool_schedule_ticks_late_total", map[string]string{})
				return skipped >= 2 && late >= 2
			})
			// The jobs first, then the counter: ticks go on firing between
			// the two reads, and the counter only grows.
			dropped, _ := tickJobs(t, get, "beat", "dropper")
			caught, _ := tickJobs(t, get, "beat", "laggard")
			fired := value(scrape(t, b.base, ""), "spool_schedule_ticks_fired_total", map[string]string{})
			if fired < float64(len(dropped)+len(caught)) || late > fired {
				t.Fatalf("fired %v, late %v, for %d and %d jobs", fired, late, len(dropped), len(caught))
			}
			wantEveryTick(t, caught)
			text := logs.String()
			for _, want := range []string{`msg="schedule ticks skipped: they enqueued no job of their own"`, `names=dropper`,
				`msg="schedule ticks fired late"`, `names=laggard`} {
				if !strings.Contains(text, want) {
					t.Fatalf("the logs lack %s:\n%s", want, text)
				}
			}
		})
	}
}

// Cron ranges and steps follow crontab(5) over HTTP: a reversed range is
// refused naming the field, and stores nothing; a step larger than its
// range takes the range's start.
func TestSchedulesCronRangesAndStepsOverHTTP(t *testing.T) {
	t.Parallel()
	b := setup(t)
	for _, expr := range []string{"0 22-2 * * *", "*/5 * * * 5-1", "15/20 * * * *"} {
		code, body := b.callAs("", "PUT", "/v1/schedules/x", fmt.Sprintf(`{"cron":%q,"job":{"kind":"k"}}`, expr))
		wantError(t, expr, code, body, 400, "invalid_argument", "cron")
		if !strings.Contains(string(body), " field ") {
			t.Fatalf("%s: the message names no cron field: %s", expr, body)
		}
	}
	if out := b.must(200, "GET", "/v1/schedules", nil); len(objs(out["schedules"])) != 0 {
		t.Fatalf("refused puts stored schedules: %v", out)
	}
	out := b.must(201, "PUT", "/v1/schedules/x", obj{"cron": "0 0 1 */12 *", "job": obj{"kind": "k"}})
	next := parseTime(t, out["next_run_at"])
	if next.Month() != time.January || next.Day() != 1 || next.Hour() != 0 || next.Minute() != 0 || next.After(time.Now().AddDate(1, 0, 1)) {
		t.Fatalf("*/12 in the month field: next run %v, want the next 1 January", next)
	}
}
