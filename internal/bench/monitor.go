package bench

import (
	"fmt"
	"strings"
	"sync"
	"time"
)

// Monitor timing: the server's memory is sampled every sampleEvery, and
// the progress line is redrawn every progressEvery.
const (
	sampleEvery   = 250 * time.Millisecond
	progressEvery = time.Second
)

// monitor samples the server's memory during the timed window and draws
// the live progress line.
type monitor struct {
	quit chan struct{}
	wg   sync.WaitGroup
}

func (r *runner) startMonitor() *monitor {
	m := &monitor{quit: make(chan struct{})}
	m.wg.Add(1)
	go func() {
		defer m.wg.Done()
		r.monitorLoop(m.quit)
	}()
	return m
}

func (m *monitor) stop() {
	close(m.quit)
	m.wg.Wait()
}

func (r *runner) monitorLoop(quit <-chan struct{}) {
	tick := time.NewTicker(sampleEvery)
	defer tick.Stop()
	start := time.Now()
	lastDraw, lastCount := start, int64(0)
	drawn := 0
	for {
		select {
		case <-quit:
			if r.o.Progress != nil && drawn > 0 {
				fmt.Fprintf(r.o.Progress, "\r%s\r", strings.Repeat(" ", drawn))
			}
			return
		case now := <-tick.C:
			if r.inWindow.Load() {
				if u, ok := r.t.usage(); ok && u.RSS > r.rssMax.Load() {
					r.rssMax.Store(u.RSS)
				}
			}
			if r.o.Progress == nil || now.Sub(lastDraw) < progressEvery-sampleEvery/2 {
				continue
			}
			count := r.processed.Load()
			if !workerMode(r.o.Mode) || *r.phase.Load() == "prefill" {
				count = r.enqueued.Load()
			}
			rate := float64(count-lastCount) / now.Sub(lastDraw).Seconds()
			lastDraw, lastCount = now, count
			line := r.progressLine(now.Sub(start), rate)
			pad := max(drawn-len(line), 0)
			fmt.Fprintf(r.o.Progress, "\r%s%s", line, strings.Repeat(" ", pad))
			drawn = len(line)
		}
	}
}

func (r *runner) progressLine(elapsed time.Duration, rate float64) string {
	var b strings.Builder
	if r.o.Label != "" {
		b.WriteString(r.o.Label + "  ")
	}
	fmt.Fprintf(&b, "%s %s %5.0fs  enqueued %d", r.o.Mode, *r.phase.Load(), elapsed.Seconds(), r.enqueued.Load())
	if workerMode(r.o.Mode) {
		fmt.Fprintf(&b, "  processed %d", r.processed.Load())
	}
	fmt.Fprintf(&b, "  %.0f/s  errors %d", rate, r.errorCount())
	return b.String()
}
