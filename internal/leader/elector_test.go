package leader

import (
	"context"
	"sync"
	"testing"
	"time"
)

// fakeLock is a lock shared by several electors in one process: the first
// to try takes it; taking it away closes the holder's channel.
type fakeLock struct {
	mu     *sync.Mutex
	holder **fakeLock
	lost   chan struct{}
}

func (l *fakeLock) TryAcquire(context.Context) (<-chan struct{}, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if *l.holder != nil {
		return nil, nil
	}
	*l.holder = l
	l.lost = make(chan struct{})
	return l.lost, nil
}

func (l *fakeLock) Release() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if *l.holder == l {
		*l.holder = nil
	}
}

// revoke takes the lock from its holder, as a failed session would.
func (l *fakeLock) revoke() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if *l.holder == l {
		close(l.lost)
		*l.holder = nil
	}
}

// Of two electors one leads; when it loses the lock the other takes over,
// and the first stops its services before that.
func TestElectorHandsOver(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	var holder *fakeLock
	running := make(chan int, 10)
	stopped := make(chan int, 10)
	var locks []*fakeLock
	var electors []*Elector
	for i := range 2 {
		l := &fakeLock{mu: &mu, holder: &holder}
		locks = append(locks, l)
		e := New(Config{Lock: l, Retry: 10 * time.Millisecond,
			OnElected: func(context.Context) { running <- i },
			OnDemoted: func() { stopped <- i }})
		electors = append(electors, e)
		if err := e.Start(context.Background()); err != nil {
			t.Fatal(err)
		}
		defer e.Stop()
	}
	first := <-running
	if !electors[first].Leader() || electors[1-first].Leader() {
		t.Fatalf("leaders: %v, %v", electors[0].Leader(), electors[1].Leader())
	}
	locks[first].revoke()
	if got := <-stopped; got != first {
		t.Fatalf("node %d stopped, want %d", got, first)
	}
	select {
	case <-running: // either node may win the next round; one leads again
	case <-time.After(5 * time.Second):
		t.Fatal("nobody took over")
	}
	electors[0].Stop()
	electors[1].Stop()
}

// Stop is idempotent and safe before Start.
func TestElectorStopBeforeStart(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	var holder *fakeLock
	e := New(Config{Lock: &fakeLock{mu: &mu, holder: &holder}, OnElected: func(context.Context) {}, OnDemoted: func() {}})
	e.Stop()
	e.Stop()
}
