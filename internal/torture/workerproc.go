//go:build linux

package torture

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"syscall"
	"time"

	"github.com/spoolq/spool/internal/loadgen"
)

// WorkerProc is a worker process (RunWorker) the harness started, with its
// reports and a line-based control input.
type WorkerProc struct {
	*loadgen.Process
	// Events receives the process's WorkerEvent lines; it is closed when
	// the process's output ends.
	Events <-chan WorkerEvent
	stdin  *os.File
}

// StartWorker runs `bin worker --server url args...`: bin is the harness
// binary, spool-torture, whose worker command runs RunWorker.
func StartWorker(bin, url string, args ...string) (*WorkerProc, error) {
	inR, inW, err := os.Pipe()
	if err != nil {
		return nil, fmt.Errorf("start worker: %w", err)
	}
	outR, outW, err := os.Pipe()
	if err != nil {
		inR.Close()
		inW.Close()
		return nil, fmt.Errorf("start worker: %w", err)
	}
	cmd := exec.Command(bin, append([]string{"worker", "--server", url}, args...)...)
	cmd.Stdin, cmd.Stdout = inR, outW
	// SIGKILL on the harness's death reaches a worker stopped with
	// SIGSTOP too.
	p, err := loadgen.StartProcess("worker", cmd, syscall.SIGKILL)
	inR.Close() // the child's ends of the pipes
	outW.Close()
	if err != nil {
		inW.Close()
		outR.Close()
		return nil, err
	}
	events := make(chan WorkerEvent, 1024)
	go func() {
		defer close(events)
		defer outR.Close()
		lines := bufio.NewScanner(outR)
		for lines.Scan() {
			var e WorkerEvent
			if json.Unmarshal(lines.Bytes(), &e) == nil {
				events <- e
			}
		}
	}()
	return &WorkerProc{Process: p, Events: events, stdin: inW}, nil
}

// Send writes one control line to the worker.
func (w *WorkerProc) Send(line string) error {
	if _, err := fmt.Fprintln(w.stdin, line); err != nil {
		return fmt.Errorf("write to worker %d: %w", w.Pid(), err)
	}
	return nil
}

// Close kills the worker if it still runs and closes its input.
func (w *WorkerProc) Close() {
	_ = w.Kill()
	_ = w.stdin.Close()
}

// next waits up to limit for the worker's next event matching keep.
func (w *WorkerProc) next(limit time.Duration, keep func(WorkerEvent) bool) (WorkerEvent, error) {
	timer := time.NewTimer(limit)
	defer timer.Stop()
	for {
		select {
		case e, ok := <-w.Events:
			if !ok {
				return WorkerEvent{}, fmt.Errorf("worker %d ended its output (%v): %s", w.Pid(), w.ExitErr(), w.Logs())
			}
			if keep(e) {
				return e, nil
			}
		case <-timer.C:
			return WorkerEvent{}, fmt.Errorf("no event from worker %d within %v: %s", w.Pid(), limit, w.Logs())
		}
	}
}
