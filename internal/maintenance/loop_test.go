package maintenance

import (
	"context"
	"sync/atomic"
	"testing"
	"time"
)

func wall() time.Time { return time.Now() }

// A woken loop runs its pass long before its idle interval ends.
func TestLoopWakeRunsEarly(t *testing.T) {
	t.Parallel()
	passes := make(chan time.Time, 10)
	l := newLoop("test", time.Hour, wall, nil, func(ctx context.Context, now time.Time) (time.Time, error) {
		passes <- now
		return time.Time{}, nil
	})
	if err := l.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	defer l.Stop()
	<-passes // the first pass runs at start
	woke := time.Now()
	l.Wake(time.Now().Add(20 * time.Millisecond))
	select {
	case at := <-passes:
		if d := at.Sub(woke); d < 15*time.Millisecond {
			t.Fatalf("pass ran %v after the wake, before the asked time", d)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("woken loop did not run its pass")
	}
}

// A pass that reports its next deadline runs again at that deadline.
func TestLoopFollowsReportedDeadline(t *testing.T) {
	t.Parallel()
	var n atomic.Int32
	done := make(chan struct{})
	l := newLoop("test", time.Hour, wall, nil, func(ctx context.Context, now time.Time) (time.Time, error) {
		if n.Add(1) == 3 {
			close(done)
		}
		return now.Add(10 * time.Millisecond), nil
	})
	_ = l.Start(context.Background())
	defer l.Stop()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatalf("only %d passes ran", n.Load())
	}
}

// Stop is idempotent and safe before Start.
func TestLoopStopBeforeStart(t *testing.T) {
	t.Parallel()
	l := newLoop("test", time.Hour, wall, nil, func(context.Context, time.Time) (time.Time, error) { return time.Time{}, nil })
	l.Stop()
	l.Stop()
}
