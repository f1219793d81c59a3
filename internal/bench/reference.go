package bench

// Reference is a figure another system published for a configuration that
// a preset reproduces. Figure is in jobs (messages) a second; nil means
// the source publishes no figure for that configuration.
type Reference struct {
	System string   `json:"system"`
	Figure *float64 `json:"figure"`
	// FigureMBps is the bandwidth the source publishes beside Figure, in
	// its own MB a second (Note says how it counts them); nil when it
	// publishes none.
	FigureMBps *float64 `json:"figure_mb_per_sec"`
	Setup      string   `json:"setup"`
	Hardware   string   `json:"hardware"`
	Source     string   `json:"source"`
	// Note says how the source counts what it publishes and how the
	// preset models its setup, where that needs saying.
	Note string `json:"note,omitempty"`
}

// The sources of the reference figures, with the hardware and settings
// they were measured on as the sources state them.
var (
	srcJobbie = Reference{
		System:   "Jobbie (now Corvo), Go + SQLite, SYNCHRONOUS=NORMAL + BatchWriter, over HTTP; its documented bench command moves 10,000 jobs",
		Hardware: "Intel Core i7-11850H, Linux 6.9.3, NVMe SSD",
		Source:   "https://github.com/corvohq/corvo/commits/main/docs/BENCHMARKS.md (SQLite-era revision of docs/BENCHMARKS.md, since replaced by Raft+Pebble figures)",
	}
	srcBullMQ = Reference{
		System:   "BullMQ Elixir on Redis 7.4, no-op jobs",
		Hardware: "Apple M2 Pro (MacBook Pro), Redis in Docker",
		Source:   "https://hexdocs.pm/bullmq/benchmarks.html (github.com/taskforcesh/bullmq elixir/guides/benchmarks.md)",
	}
	srcQueenBP = Reference{
		System:   "Queen 0.14.0.alpha.3 on PostgreSQL (synchronous_commit=on), autocannon 1×50 connections, consumer 50 connections at batch 100 running concurrently, 15-minute runs",
		Hardware: "32 vCPU, 62 GiB RAM, Ubuntu 24.04",
		Source:   "https://github.com/smartpricing/queen/blob/master/benchmark-queen/2026-04-26/README.md (summarized at https://queenmq.com/benchmarks.html)",
	}
	// srcQueenCPP is the "Official Benchmark Results" table of Queen's
	// C++ benchmark tool, tests T1 to T5.
	srcQueenCPP = Reference{
		System: "Queen on PostgreSQL, its C++ benchmark tool (benchmark/queen_benchmark.cpp), 10 threads in single-queue mode: " +
			"one queue, thread i on partition i mod --partitions (the results do not state --partitions; the documented command leaves the default, 4)",
		Hardware: "Apple M4 Air, all components on the same machine, PostgreSQL in Docker, 4 server workers, 95 DB connections",
		Source: "https://github.com/smartpricing/queen/blob/master/website/server/benchmarking.md (\"Official Benchmark Results\"; " +
			"server settings in website/server/benchmarks.md)",
		Note: "a consumer thread leases its partition and takes a batch of its messages, which Spool's unordered groups match in throughput terms; " +
			"its MB/s are MiB/s of a fixed 300 bytes per pushed message and of each delivered message's JSON, metadata included (about 530 bytes by its figures)",
	}
	// srcSpool marks Spool's own comparisons, which no other system
	// publishes.
	srcSpool = Reference{
		System:   "Spool itself: a comparison within this preset",
		Hardware: "this machine",
		Source:   "Spool's own, no published figure",
	}
)

// ref returns src with a figure (0: none published) and the setup of the
// figure.
func ref(src Reference, figure float64, setup string) *Reference {
	r := src
	if figure > 0 {
		r.Figure = ptr(figure)
	}
	r.Setup = setup
	return &r
}

// refMB returns src with a figure, the bandwidth published beside it (0:
// none) and the setup of both.
func refMB(src Reference, figure, mbps float64, setup string) *Reference {
	r := ref(src, figure, setup)
	if mbps > 0 {
		r.FigureMBps = ptr(mbps)
	}
	return r
}
