package client

// HoldOutcomes makes w send its jobs' acks and fails only once n wait (or
// when it stops), for its first call only, however idle it is, so that
// tests choose which outcomes share a call, or keep one unsent.
func HoldOutcomes(w *Worker, n int) {
	w.settler.holdFor = n
}

// BeginStop begins w's graceful stop and returns: w starts no job after
// it.
func BeginStop(w *Worker) { w.beginStop() }

// Dropped is how many jobs of runs w dropped unrun, once the call that
// released them was answered.
func Dropped(w *Worker) int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.dropped
}

// OnOutcomeQueued has fn told of the id of each job whose ack or fail
// starts waiting to be sent. fn must not block.
func OnOutcomeQueued(w *Worker, fn func(id string)) {
	w.settler.queued = fn
}
