package bench

// Result is what one run measured. Figures that could not be measured are
// null in JSON ("unknown" in tables), never zero.
type Result struct {
	// Name is the preset configuration the run belongs to, if any.
	Name string `json:"name,omitempty"`
	// Mode, Server ("embedded" or the URL), Sync (the embedded server's
	// durability) and CPUs (of this machine) describe the setup.
	Mode   string `json:"mode"`
	Server string `json:"server"`
	Sync   string `json:"sync,omitempty"`
	CPUs   int    `json:"cpus"`
	// Transport is TransportStream when the run's requests went over a
	// stream; empty for HTTP, the default.
	Transport string `json:"transport,omitempty"`
	// Settings are the effective options, defaults filled in.
	Settings Settings `json:"settings"`

	// Seconds is the timed window: the enqueueing in the enqueue modes,
	// the drain in process mode, first enqueue to last ack otherwise.
	Seconds float64 `json:"seconds"`
	// Enqueued and Processed count jobs: accepted by the server, and
	// acked by a worker, during the whole run.
	Enqueued  int64 `json:"enqueued"`
	Processed int64 `json:"processed"`
	// Requests is the number of successful HTTP requests in the window,
	// OpsPerSec their rate; JobsPerSec is the rate of jobs enqueued (the
	// enqueue modes) or processed (the others) in the window.
	Requests   int64   `json:"requests"`
	OpsPerSec  float64 `json:"ops_per_sec"`
	JobsPerSec float64 `json:"jobs_per_sec"`
	// EnqueuePerSec is the rate of jobs enqueued while the producers ran
	// (lifecycle and latency modes; the enqueue modes' JobsPerSec).
	EnqueuePerSec float64 `json:"enqueue_per_sec,omitempty"`
	// Latency holds the request latencies by kind, and in latency mode
	// the enqueue → handler-start latency.
	Latency Latencies `json:"latency"`
	// TheoreticalJobsPerSec (workers × concurrency / work) and Efficiency
	// (JobsPerSec over it) are set when jobs have simulated work.
	TheoreticalJobsPerSec *float64 `json:"theoretical_jobs_per_sec,omitempty"`
	Efficiency            *float64 `json:"efficiency,omitempty"`

	// ServerCPUPercent is the server's CPU time over the window as a
	// percentage of one core (so up to 100 × CPUs); ServerPeakRSSMB its
	// peak resident memory since it started (VmHWM); ServerSampledRSSMB
	// the largest resident memory sampled during the window.
	ServerCPUPercent   *float64 `json:"server_cpu_percent"`
	ServerPeakRSSMB    *float64 `json:"server_peak_rss_mb"`
	ServerSampledRSSMB *float64 `json:"server_sampled_rss_mb"`
	// ClientCPUPercent is the load generator's own CPU over the window,
	// ClientPeakRSSMB its peak resident memory.
	ClientCPUPercent *float64 `json:"client_cpu_percent"`
	ClientPeakRSSMB  *float64 `json:"client_peak_rss_mb"`

	// Errors counts failed requests, failed items of batch acks and
	// failed checks; ErrorSamples holds the first few messages.
	Errors       int64    `json:"errors"`
	ErrorSamples []string `json:"error_samples,omitempty"`
	// MachineBefore and MachineDuring are how busy the machine was apart
	// from the run, just before it and during its timed window (Busy set
	// when the run warned that its figures are lower than on an idle
	// machine); nil where the machine cannot be read (not Linux).
	MachineBefore *MachineLoad `json:"machine_before,omitempty"`
	MachineDuring *MachineLoad `json:"machine_during,omitempty"`
	// Observers is what the scrapes of /metrics and the reader of
	// /v1/events saw; nil when the run had neither.
	Observers *Observers `json:"observers,omitempty"`
	// Verification compares the server's queue counts with what the run
	// did; nil when the run was interrupted.
	Verification *Verification `json:"verification,omitempty"`
	// Interrupted says why the run stopped early, if it did.
	Interrupted string `json:"interrupted,omitempty"`
	// ServerLog holds what the embedded server logged at warn or above.
	ServerLog []string `json:"server_log,omitempty"`
}

// Settings are the effective options of a run.
type Settings struct {
	Jobs         int     `json:"jobs,omitempty"`
	Duration     string  `json:"duration,omitempty"`
	Batch        int     `json:"batch"`
	Concurrency  int     `json:"concurrency"`
	Workers      int     `json:"workers,omitempty"`
	Producers    int     `json:"producers,omitempty"`
	Queues       int     `json:"queues"`
	Groups       int     `json:"groups,omitempty"`
	Limits       string  `json:"limits,omitempty"`
	Rate         float64 `json:"rate,omitempty"`
	Work         string  `json:"work,omitempty"`
	PayloadBytes int     `json:"payload_bytes"`
}

// Latencies are the latency percentiles of a run by kind; a kind the run
// did not exercise is omitted.
type Latencies struct {
	// Enqueue, Fetch and Ack are request latencies. In latency mode
	// Enqueue is measured from each request's send, or from its scheduled
	// send time when its sender was still busy then, so that a stall
	// delays the measurement instead of the load (loadgen.Call.Due).
	Enqueue *LatencyStats `json:"enqueue,omitempty"`
	Fetch   *LatencyStats `json:"fetch,omitempty"`
	Ack     *LatencyStats `json:"ack,omitempty"`
	// Start is the time from a job's scheduled enqueue to the start of
	// its handler (latency mode).
	Start *LatencyStats `json:"start,omitempty"`
}

// Verification is the server's view of the run's queues after it, from
// GET /v1/queues/{name}.
type Verification struct {
	// OK is true when every job the run enqueued is in the state the mode
	// should leave it in (completed, or available in the enqueue modes)
	// and none is anywhere else.
	OK bool `json:"ok"`
	// Expected is the number of jobs the run enqueued, Counts the sum of
	// the queues' counts by state.
	Expected int64            `json:"expected"`
	Counts   map[string]int64 `json:"counts"`
}

// maxErrorSamples bounds the error messages a Result keeps.
const maxErrorSamples = 5

// addError counts one error of a finished run and keeps its message if it
// is among the first few distinct ones. It is not safe for concurrent use;
// a running run counts errors with runner.countError.
func (r *Result) addError(msg string) {
	r.Errors++
	r.ErrorSamples = addSample(r.ErrorSamples, msg)
}

// addSample appends msg to samples unless it is already there or there
// are maxErrorSamples already.
func addSample(samples []string, msg string) []string {
	if len(samples) >= maxErrorSamples {
		return samples
	}
	for _, s := range samples {
		if s == msg {
			return samples
		}
	}
	return append(samples, msg)
}

func ptr(v float64) *float64 { return &v }
