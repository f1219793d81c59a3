package server

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/spoolq/spool/internal/pgtest"
)

// These tests run real `spool server` processes, built from this module,
// against one PostgreSQL database, and break them as production would: a
// node killed with SIGKILL, the database restarted under load.

var spoolBin struct {
	once sync.Once
	path string
	err  error
}

// buildSpool builds the spool binary once per test binary.
func buildSpool(t *testing.T) string {
	t.Helper()
	spoolBin.once.Do(func() {
		dir, err := os.MkdirTemp("", "spool-bin-")
		if err != nil {
			spoolBin.err = err
			return
		}
		spoolBin.path = filepath.Join(dir, "spool")
		out, err := exec.Command("go", "build", "-o", spoolBin.path, "github.com/spoolq/spool/cmd/spool").CombinedOutput()
		if err != nil {
			spoolBin.err = fmt.Errorf("go build: %v\n%s", err, out)
		}
	})
	if spoolBin.err != nil {
		t.Fatalf("build spool: %v", spoolBin.err)
	}
	return spoolBin.path
}

// removeSpool deletes the binary buildSpool built, if any.
func removeSpool() {
	if spoolBin.path != "" {
		_ = os.RemoveAll(filepath.Dir(spoolBin.path))
	}
}

// node is one spool server process.
type node struct {
	t       *testing.T
	cmd     *exec.Cmd
	base    string
	elected atomic.Int64 // unix nanoseconds of its last election, 0 if never
	exited  chan struct{}
}

// startNode runs `spool server` on a free port against db and waits until
// it listens.
func startNode(t *testing.T, db string) *node {
	t.Helper()
	cmd := exec.Command(buildSpool(t), "server", "--addr", "127.0.0.1:0", "--db", db, "--data", t.TempDir(),
		"--log-level", "info", "--prune-interval", "1s")
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatalf("start node: %v", err)
	}
	n := &node{t: t, cmd: cmd, exited: make(chan struct{})}
	addr := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			line := sc.Text()
			if rest, ok := strings.CutPrefix(line, "spool listening on http://"); ok {
				addr <- strings.Fields(rest)[0]
			}
			if strings.Contains(line, "elected leader") {
				n.elected.Store(time.Now().UnixNano())
			}
			if strings.Contains(line, "lost leadership") {
				n.elected.Store(0)
			}
		}
	}()
	go func() { _ = cmd.Wait(); close(n.exited) }()
	t.Cleanup(n.kill)
	select {
	case a := <-addr:
		n.base = a
	case <-n.exited:
		t.Fatal("node exited at start")
	case <-time.After(30 * time.Second):
		t.Fatal("node did not start listening")
	}
	return n
}

// kill ends the node with SIGKILL (only the process this test started).
func (n *node) kill() {
	select {
	case <-n.exited:
		return
	default:
	}
	_ = n.cmd.Process.Signal(syscall.SIGKILL)
	<-n.exited
}

// waitLeader returns the node elected last among ns, waiting up to limit.
func waitLeader(t *testing.T, ns []*node, limit time.Duration) *node {
	t.Helper()
	deadline := time.Now().Add(limit)
	for time.Now().Before(deadline) {
		var lead *node
		for _, n := range ns {
			if e := n.elected.Load(); e != 0 && (lead == nil || e > lead.elected.Load()) {
				lead = n
			}
		}
		if lead != nil {
			return lead
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("no leader within %v", limit)
	return nil
}

var httpc = &http.Client{Timeout: 15 * time.Second}

// post sends a JSON request to a node and decodes the answer.
func post(base, path string, body any) (int, map[string]any, error) {
	data, _ := json.Marshal(body)
	resp, err := httpc.Post(base+path, "application/json", bytes.NewReader(data))
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	var out map[string]any
	_ = json.Unmarshal(raw, &out)
	return resp.StatusCode, out, nil
}

// ledger records what clients saw: jobs acknowledged as enqueued, every
// hand-out, and every successful ack.
type ledger struct {
	mu        sync.Mutex
	enqueued  map[string]bool
	fetchedAt map[string][]time.Time
	acked     map[string]int
	statuses  map[int]int
}

func newLedger() *ledger {
	return &ledger{enqueued: map[string]bool{}, fetchedAt: map[string][]time.Time{}, acked: map[string]int{}, statuses: map[int]int{}}
}

func (l *ledger) status(code int) {
	l.mu.Lock()
	l.statuses[code]++
	l.mu.Unlock()
}

// produce enqueues jobs with the ids given, in batches, through the nodes
// in turn, retrying a batch (same ids, so idempotent) until a node takes it.
func (l *ledger) produce(ns func() []string, queue string, ids []string, lease time.Duration, stop <-chan struct{}) error {
	for len(ids) > 0 {
		n := min(len(ids), 50)
		jobs := make([]map[string]any, n)
		for i, id := range ids[:n] {
			jobs[i] = map[string]any{"id": id, "queue": queue, "kind": "k", "lease_ms": lease.Milliseconds()}
		}
		deadline := time.Now().Add(60 * time.Second)
		for try := 0; ; try++ {
			select {
			case <-stop:
				return fmt.Errorf("stopped with %d jobs not enqueued", len(ids))
			default:
			}
			if time.Now().After(deadline) {
				return fmt.Errorf("no node took a batch for a minute; %d jobs not enqueued", len(ids))
			}
			bases := ns()
			status, _, err := post(bases[try%len(bases)], "/v1/jobs/batch", map[string]any{"jobs": jobs})
			if err == nil {
				l.status(status)
			}
			if err == nil && status == 200 {
				break
			}
			time.Sleep(50 * time.Millisecond)
		}
		l.mu.Lock()
		for _, id := range ids[:n] {
			l.enqueued[id] = true
		}
		l.mu.Unlock()
		ids = ids[n:]
	}
	return nil
}

// work fetches and acks jobs of queue through the nodes until stop,
// moving to the next node whenever one fails.
func (l *ledger) work(ns func() []string, queue string, stop <-chan struct{}) {
	k := 0
	for {
		select {
		case <-stop:
			return
		default:
		}
		bases := ns()
		base := bases[k%len(bases)]
		status, out, err := post(base, "/v1/fetch", map[string]any{"queues": []string{queue}, "max": 20, "wait_ms": 500})
		if err != nil || status != 200 {
			if err == nil {
				l.status(status)
			}
			k++
			time.Sleep(20 * time.Millisecond)
			continue
		}
		jobs, _ := out["jobs"].([]any)
		if len(jobs) == 0 {
			continue
		}
		now := time.Now()
		items := make([]map[string]any, len(jobs))
		l.mu.Lock()
		for i, j := range jobs {
			job := j.(map[string]any)
			id := job["id"].(string)
			l.fetchedAt[id] = append(l.fetchedAt[id], now)
			items[i] = map[string]any{"id": id, "token": job["lease"].(map[string]any)["token"]}
		}
		l.mu.Unlock()
		for try := 0; ; try++ {
			bases := ns()
			status, out, err := post(bases[(k+try)%len(bases)], "/v1/jobs/ack", map[string]any{"items": items})
			if err != nil || status != 200 {
				if err == nil {
					l.status(status)
				}
				if try > 200 {
					break // the leases will run out and the jobs come back
				}
				time.Sleep(20 * time.Millisecond)
				continue
			}
			l.mu.Lock()
			for _, r := range out["results"].([]any) {
				res := r.(map[string]any)
				if res["error"] == nil && res["state"] == "completed" {
					l.acked[res["id"].(string)]++
				}
			}
			l.mu.Unlock()
			break
		}
	}
}

// check fails unless the jobs acknowledged as enqueued are want, none was
// acked successfully twice, and no call met an internal error. (An ack
// whose answer was lost and that was sent again meets lease_lost; the
// server's counts, see waitCompleted, show that such jobs completed.)
func (l *ledger) check(t *testing.T, want int) {
	t.Helper()
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.enqueued) != want {
		t.Fatalf("%d jobs acknowledged as enqueued, want %d", len(l.enqueued), want)
	}
	for id, n := range l.acked {
		if n != 1 {
			t.Fatalf("job %s acked %d times", id, n)
		}
		if !l.enqueued[id] {
			t.Fatalf("job %s acked but never enqueued", id)
		}
	}
	if l.statuses[500] > 0 {
		t.Fatalf("clients saw %d internal errors: %v", l.statuses[500], l.statuses)
	}
}

// waitAcked waits until n jobs were acked as far as the clients know.
func (l *ledger) waitAcked(t *testing.T, n int, stall time.Duration) {
	t.Helper()
	progress, seen := time.Now(), -1
	for {
		l.mu.Lock()
		got := len(l.acked)
		l.mu.Unlock()
		if got >= n {
			return
		}
		if got > seen {
			progress, seen = time.Now(), got
		}
		if time.Since(progress) > stall {
			t.Fatalf("%d of %d jobs acked, and none for %v", got, n, stall)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// waitCompleted waits until the server counts want completed jobs in each
// queue, and nothing else there: every job enqueued (ids are fixed, so a
// retried enqueue is a duplicate, not a second job) completed. It fails
// when no more jobs complete for stall, so that a slow machine makes it
// wait longer rather than fail.
func waitCompleted(t *testing.T, bases func() []string, want map[string]int, stall time.Duration) {
	t.Helper()
	progress := time.Now()
	most := map[string]float64{} // the most completed jobs seen in each queue
	for k := 0; ; k++ {
		done := true
		var last map[string]any
		for q, n := range want {
			resp, err := httpc.Get(bases()[k%len(bases())] + "/v1/queues/" + q)
			if err != nil {
				done = false
				continue
			}
			var out map[string]any
			_ = json.NewDecoder(resp.Body).Decode(&out)
			resp.Body.Close()
			counts, _ := out["counts"].(map[string]any)
			if c, _ := counts["completed"].(float64); c > most[q] {
				most[q], progress = c, time.Now()
			}
			total := 0.0
			for _, c := range counts {
				total += c.(float64)
			}
			if counts["completed"] != float64(n) || total != float64(n) {
				done, last = false, counts
			}
		}
		if done {
			return
		}
		if time.Since(progress) > stall {
			t.Fatalf("queues not all completed, and no job completed for %v (last counts seen %v, want %v)", stall, last, want)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func jobIDs(prefix string, n int) []string {
	ids := make([]string, n)
	for i := range ids {
		ids[i] = fmt.Sprintf("%s-%d", prefix, i)
	}
	return ids
}

// Three nodes under load; the leader is killed with SIGKILL while a worker
// holds jobs leased through it. Those jobs come back through the others
// within their lease plus a second, another node takes over the
// maintenance, and every job is acked exactly once.
func TestClusterSurvivesKilledNode(t *testing.T) {
	t.Parallel()
	db := pgtest.Schema(t)
	ns := []*node{startNode(t, db), startNode(t, db), startNode(t, db)}
	victim := waitLeader(t, ns, 15*time.Second)
	var alive atomic.Pointer[[]string]
	setAlive := func(skip *node) {
		var bases []string
		for _, n := range ns {
			if n != skip {
				bases = append(bases, "http://"+n.base)
			}
		}
		alive.Store(&bases)
	}
	setAlive(nil)
	bases := func() []string { return *alive.Load() }
	const lease = 3 * time.Second
	l := newLedger()
	stop := make(chan struct{})
	var wg sync.WaitGroup

	// A worker leases jobs through the doomed node and never finishes them.
	if err := l.produce(bases, "held", jobIDs("held", 40), lease, stop); err != nil {
		t.Fatal(err)
	}
	status, out, err := post("http://"+victim.base, "/v1/fetch", map[string]any{"queues": []string{"held"}, "max": 40})
	if err != nil || status != 200 || len(out["jobs"].([]any)) != 40 {
		t.Fatalf("lease 40 jobs through the leader: %d %v %v", status, err, out)
	}
	var expiry time.Time
	for _, j := range out["jobs"].([]any) {
		exp, _ := time.Parse(time.RFC3339Nano, j.(map[string]any)["lease"].(map[string]any)["expires_at"].(string))
		if exp.After(expiry) {
			expiry = exp
		}
	}
	// Load on every node: producers and workers.
	for p := range 3 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := l.produce(bases, "load", jobIDs(fmt.Sprintf("p%d", p), 1000), lease, stop); err != nil {
				t.Error(err)
			}
		}()
	}
	for range 4 {
		wg.Add(1)
		go func() { defer wg.Done(); l.work(bases, "load", stop) }()
	}
	for range 2 {
		wg.Add(1)
		go func() { defer wg.Done(); l.work(bases, "held", stop) }()
	}
	time.Sleep(300 * time.Millisecond)
	setAlive(victim)
	victim.kill()
	killed := time.Now()
	others := []*node{}
	for _, n := range ns {
		if n != victim {
			others = append(others, n)
		}
	}
	next := waitLeader(t, others, 10*time.Second)
	t.Logf("new leader elected %v after the kill", time.Duration(next.elected.Load()-killed.UnixNano()))

	waitCompleted(t, bases, map[string]int{"held": 40, "load": 3000}, 120*time.Second)
	close(stop)
	wg.Wait()
	l.check(t, 3040)
	l.mu.Lock()
	defer l.mu.Unlock()
	var worst time.Duration
	for _, id := range jobIDs("held", 40) {
		times := l.fetchedAt[id]
		if len(times) < 1 {
			t.Fatalf("held job %s never came back", id)
		}
		if d := times[0].Sub(expiry); d > worst {
			worst = d
		}
	}
	t.Logf("held jobs came back at most %v after their lease ran out", worst)
	// The budget is the lease plus one second; half a second more absorbs
	// a loaded test machine.
	if worst > 1500*time.Millisecond {
		t.Fatalf("held jobs came back %v after their lease ran out, want within 1s", worst)
	}
}

// Two nodes under load while PostgreSQL restarts: during the outage every
// call is answered 503 quickly, and afterwards the nodes serve again
// without a restart of their own; no enqueued job is lost and none is
// acked twice.
func TestClusterSurvivesDatabaseRestart(t *testing.T) {
	t.Parallel()
	in := pgtest.Dedicated(t)
	db := in.URL("postgres")
	ns := []*node{startNode(t, db), startNode(t, db)}
	bases := func() []string { return []string{"http://" + ns[0].base, "http://" + ns[1].base} }
	l := newLedger()
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for p := range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := l.produce(bases, "q", jobIDs(fmt.Sprintf("r%d", p), 1500), 5*time.Second, stop); err != nil {
				t.Error(err)
			}
		}()
	}
	for range 3 {
		wg.Add(1)
		go func() { defer wg.Done(); l.work(bases, "q", stop) }()
	}
	l.waitAcked(t, 200, 30*time.Second)

	if err := in.StopServer(); err != nil {
		t.Fatal(err)
	}
	down := time.Now()
	for time.Since(down) < 3*time.Second {
		for _, b := range bases() {
			for _, probe := range []struct{ method, path string }{{"POST", "/v1/jobs"}, {"GET", "/readyz"}} {
				start := time.Now()
				var status int
				var err error
				if probe.method == "POST" {
					status, _, err = post(b, probe.path, map[string]any{"queue": "probe", "kind": "k"})
				} else {
					var resp *http.Response
					if resp, err = httpc.Get(b + probe.path); err == nil {
						status = resp.StatusCode
						resp.Body.Close()
					}
				}
				if err != nil || status != 503 {
					t.Fatalf("%s %s during the outage: %d, %v; want 503", probe.method, probe.path, status, err)
				}
				if d := time.Since(start); d > 2*time.Second {
					t.Fatalf("%s %s during the outage took %v, want a quick 503", probe.method, probe.path, d)
				}
			}
		}
		time.Sleep(200 * time.Millisecond)
	}
	if err := in.StartServer(); err != nil {
		t.Fatal(err)
	}
	up := time.Now()
	for _, b := range bases() {
		for {
			status, _, err := post(b, "/v1/jobs", map[string]any{"queue": "probe", "kind": "k"})
			if err == nil && status == 201 {
				break
			}
			if time.Since(up) > 20*time.Second {
				t.Fatalf("node %s still failing %v after the database came back: %d %v", b, time.Since(up), status, err)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	t.Logf("both nodes served again %v after the database came back", time.Since(up))
	waitCompleted(t, bases, map[string]int{"q": 3000}, 120*time.Second)
	close(stop)
	wg.Wait()
	l.check(t, 3000)
}

// A consumer group deleted on one node is gone on the others at once: a
// fetch on another node that had found the group answers 404, and so
// does one parked on it there.
func TestClusterConsumerGroupDeletedOnAnotherNode(t *testing.T) {
	t.Parallel()
	ns := nodes(t, 2)
	a, b := ns[0], ns[1]
	a.enqueue(obj{"queue": "feed", "kind": "k"})
	a.must(201, "PUT", "/v1/queues/feed/consumer-groups/g", obj{})
	fetch := map[string]any{"queues": []string{"feed"}, "consumer_group": "g"}
	if status, out := a.call("POST", "/v1/fetch", fetch); status != 200 || len(objs(out["jobs"])) != 1 {
		t.Fatalf("fetch of group g: %d %v", status, out)
	}
	parked := make(chan int, 1)
	go func() {
		status, _, err := post(a.base, "/v1/fetch", map[string]any{"queues": []string{"feed"}, "consumer_group": "g", "wait_ms": 12000})
		if err != nil {
			t.Error(err)
		}
		parked <- status
	}()
	a.waitFor("the fetch to park", 10*time.Second, func() bool { return a.srv.Engine().Waiting() == 1 })
	b.must(204, "DELETE", "/v1/queues/feed/consumer-groups/g", nil)
	select {
	case status := <-parked:
		if status != 404 {
			t.Fatalf("the fetch parked on the deleted group answered %d, want 404", status)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("the fetch parked on the deleted group did not answer")
	}
	if status, out := a.call("POST", "/v1/fetch", fetch); status != 404 || errorCode(out) != "not_found" {
		t.Fatalf("fetch of the deleted group on the other node: %d %v, want 404", status, out)
	}
}

// A Queen consumer group deleted on one node is created again by the next
// pop on another node, from the beginning, as on one node.
func TestClusterQueenGroupCreatedAgainAfterDeleteOnAnotherNode(t *testing.T) {
	t.Parallel()
	ns := nodes(t, 2, queenOn)
	a, b := ns[0], ns[1]
	a.queenMust(201, "POST", "/api/v1/push", obj{"items": []obj{{"queue": "news", "payload": 1, "transactionId": "m1"}}})
	popped := func() []obj {
		status, out := a.queenCall("", "GET", "/api/v1/pop/queue/news?consumerGroup=g", nil)
		if status == http.StatusNoContent {
			return nil
		}
		if status != http.StatusOK {
			t.Fatalf("pop of group g: %d %v", status, out)
		}
		return objs(out.(obj)["messages"])
	}
	if got := popped(); len(got) != 1 {
		t.Fatalf("first pop: %v", got)
	}
	b.queenMust(200, "DELETE", "/api/v1/consumer-groups/g", nil)
	a.waitFor("a pop on the other node to create the group again", 10*time.Second, func() bool {
		got := popped()
		return len(got) == 1 && got[0]["transactionId"] == "m1"
	})
}

// Each node numbers its own events: an id of node A is not node B's, so a
// reader that moves from A to B with A's id gets stream.gap, then what B
// keeps, never a silent skip.
func TestClusterEventIDsOfAnotherNodeAreAGap(t *testing.T) {
	t.Parallel()
	db := pgtest.Schema(t)
	a, b := startNode(t, db), startNode(t, db)
	rd, closeStream := openEventStream(t, "http://"+a.base, "", nil)
	if status, out, err := post("http://"+a.base, "/v1/jobs", map[string]any{"queue": "mail", "kind": "send"}); err != nil || status != 201 {
		t.Fatalf("enqueue on A: %d %v %v", status, out, err)
	}
	ev, ok := rd.next()
	if !ok || ev.name != "job.enqueued" {
		t.Fatalf("A's event: %+v %v", ev, ok)
	}
	idOfA := ev.id
	closeStream()

	var onB []string
	for range 3 {
		status, out, err := post("http://"+b.base, "/v1/jobs", map[string]any{"queue": "mail", "kind": "send"})
		if err != nil || status != 201 {
			t.Fatalf("enqueue on B: %d %v %v", status, out, err)
		}
		onB = append(onB, out["id"].(string))
	}
	rd, closeStream = openEventStream(t, "http://"+b.base, "", http.Header{"Last-Event-ID": {idOfA}})
	defer closeStream()
	if gap, ok := rd.next(); !ok || gap.name != "stream.gap" || gap.data["after"] != idOfA {
		t.Fatalf("B resumed with A's id %q: first event %+v %v, want stream.gap", idOfA, gap, ok)
	}
	for i, want := range onB {
		if ev, ok := rd.next(); !ok || ev.name != "job.enqueued" || ev.data["job_id"] != want {
			t.Fatalf("B's event %d after the gap: %+v %v, want the enqueue of %s", i, ev, ok, want)
		}
	}
}
