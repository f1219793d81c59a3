// Package client is the Go SDK of Spool, a durable background job queue
// server. It speaks the HTTP API of docs/protocol.md and uses only the
// standard library, so importing it pulls in nothing else.
//
// A Client enqueues jobs and manages jobs and queues; a Worker fetches jobs
// and runs them with handlers:
//
//	c := client.New("http://127.0.0.1:7311")
//	_, err := c.Enqueue(ctx, client.EnqueueParams{
//		Queue:   "emails",
//		Kind:    "welcome",
//		Payload: map[string]int{"user": 42},
//	})
//
//	w := client.NewWorker(c, client.WorkerConfig{Queues: []string{"emails"}})
//	w.Handle("welcome", func(ctx context.Context, j *client.Job) (any, error) {
//		var p struct{ User int }
//		if err := json.Unmarshal(j.Payload, &p); err != nil {
//			return nil, client.NoRetry(err) // retrying cannot fix bad input
//		}
//		return map[string]bool{"sent": true}, sendWelcome(ctx, p.User)
//	})
//	err = w.Run(ctx) // until ctx ends; then finishes running jobs and releases the rest
//
// # Errors
//
// Every error the server answers is an *Error carrying the stable catalog
// code (Code), the HTTP status, a message and, when one field is at fault,
// its name. Branch on the code with errors.Is and the sentinel errors
// (ErrLeaseLost, ErrNotFound, ErrInvalidState, …), and reach the details
// with errors.As:
//
//	if _, err := c.Ack(ctx, j.ID, j.Token(), nil); errors.Is(err, client.ErrLeaseLost) {
//		// another worker owns the job now: drop the result
//	}
//	var apiErr *client.Error
//	if errors.As(err, &apiErr) && apiErr.Field != "" { … }
//
// Transport failures are returned as they come from net/http, wrapped with
// the operation that failed ("ack job 01J…: Post …: connection refused");
// over the stream transport they are *url.Error values of the same form.
//
// # Stream transport
//
// The HTTP work of a call made as one HTTP/1.1 request (parsing, headers, a
// write and a read) costs the server and the client more than a small job
// itself. So by default, for an http:// URL that no proxy of the
// environment covers, a Client opens one connection, upgraded to
// spool-stream/1 (docs/protocol.md, "Stream transport"), and sends every
// call as a frame on it, many at once from many goroutines, with calls
// made at about the same time sharing system calls. Where the server or a
// proxy in front of it refuses the upgrade as unknown, the Client falls
// back to HTTP for good; where it refuses it for one call (no token, say),
// that call goes over HTTP, so that every call gets the answer HTTP would
// give. WithHTTP and WithStream choose one transport for good, and
// WithHTTPClient means HTTP:
//
//	c := client.New("http://127.0.0.1:7311", client.WithToken(token))                   // the stream where it can
//	c := client.New("http://127.0.0.1:7311", client.WithHTTP(), client.WithToken(token)) // one request per call
//
// The calls, their answers and their errors are the same as over HTTP;
// Worker and Batcher work unchanged. The connection is dialled on the first
// call and again after it breaks; the calls in flight when it breaks fail
// with a network error (a *url.Error), which the Worker retries as it
// retries any. A call whose context ends is abandoned at once and the
// server is told to stop it. The stream needs an http:// base URL (it does
// not speak TLS; with WithStream and https:// every call fails saying so)
// and, with auth on, a token even for Health and Ready (the default Client
// makes those over HTTP without one). CloseIdleConnections closes the
// stream once the calls in flight on it are answered.
//
// # Leases
//
// Fetch hands each job out with a Lease whose Token only its holder knows.
// Ack, Fail, Extend, Progress and Release carry that token; a token that is
// not current (the lease ran out and the job went to another worker, or the
// job already finished) gets an error matching ErrLeaseLost and changes
// nothing, and an unknown id one matching ErrNotFound. The batch forms
// (AckBatch, FailBatch, ExtendBatch, ReleaseBatch) apply their items one
// by one: the call's error is for the call as a whole (transport, bad
// input), and each result's Err holds that item's own *Error, so one stale
// token fails only its own item. A Worker sends its jobs' outcomes with
// them: the acks and fails of handlers that finish within SettleDelay of
// each other share one call.
//
// # Transactions
//
// Transact acks and fails leased jobs and enqueues jobs in one call, all
// of it or nothing, so that a job's follow-ups are enqueued exactly when
// the job is acked:
//
//	_, err := c.Transact(ctx, client.Transaction{
//		Ack:     []client.AckItem{{ID: j.ID, Token: j.Token(), Result: summary}},
//		Enqueue: []client.EnqueueParams{{Queue: "reports", Kind: "send_report", Payload: summary}},
//	})
//
// Unlike the batch forms, a stale token or unknown job fails the whole call
// (ErrLeaseLost, ErrNotFound, with Error.Field naming the item) and
// nothing changes.
//
// # Schedules
//
// A cron schedule has the server enqueue a job at every tick of its
// timing: a cron expression read in an IANA time zone, or a fixed interval
// counted from the Unix epoch.
//
//	s, created, err := c.PutSchedule(ctx, "nightly-report", client.ScheduleSpec{
//		Job:      client.EnqueueParams{Queue: "reports", Kind: "build_report"},
//		Cron:     "0 3 * * *",
//		Timezone: "Europe/Berlin",
//		Misfire:  client.MisfireCatchUp, // fire the ticks missed while the server was down
//	})
//
// Each tick's job gets the id "{name}:{tick in Unix milliseconds}", so a
// tick enqueues at most one job across crashes, restarts and nodes.
// GetSchedule, ListSchedules, PauseSchedule, ResumeSchedule,
// TriggerSchedule (one job now) and DeleteSchedule manage schedules;
// docs/protocol.md ("Schedules") has the cron grammar, the daylight-saving
// rules and the misfire policies.
//
// # Flow control
//
// A queue can be held to rates and caps, for the whole queue and for each
// group of its jobs, a group being whatever EnqueueParams.Group names (a
// tenant, a customer):
//
//	q, err := c.SetQueueLimits(ctx, "emails", client.Limits{
//		Rate:           client.Rate{Limit: 100, Period: time.Minute}, // the mail provider's quota
//		GroupMaxActive: 1,                                            // one job of each tenant at a time
//	})
//	_, err = c.Enqueue(ctx, client.EnqueueParams{Queue: "emails", Kind: "welcome", Group: "tenant-42"})
//
// The server hands out a queue's jobs round-robin over their groups, one
// job of each group a turn, and no more than its limits let start, so
// workers need nothing new: a Worker with Concurrency 10 on a queue with
// MaxActive 2 runs at most two handlers at once. Queue reports the limits;
// ClearQueueLimits removes them. docs/protocol.md ("Flow control") has
// the rules.
//
// # Queue settings
//
// A queue can send the jobs that die in it to a dead-letter queue, give up
// on jobs nobody started in time, and give the jobs enqueued without a
// lease, maximum attempts or delay of their own its defaults for them:
//
//	q, err := c.SetQueueSettings(ctx, "orders", client.QueueSettings{
//		DeadLetterQueue: "orders-dlq",    // a copy of every dead job goes here
//		MaxWait:         time.Minute,     // a job not started within a minute dies
//		DefaultLease:    5 * time.Minute, // jobs without a Lease get 5 minutes
//	})
//
// A job that dies stays dead in its queue, and a copy with its payload and
// Errors is enqueued into the dead-letter queue, its Job.DeadLetterOf naming
// the dead job; workers fetch the copies like any jobs. A job past its
// MaxWait is never handed out: it dies with the error "not started within
// max wait". A job enqueued without a Lease, MaxAttempts or Delay (and
// RunAt) takes its queue's DefaultLease, DefaultMaxAttempts or
// DefaultDelay, else the server's. ClearQueueSettings removes the
// settings. docs/protocol.md ("Queue settings") has the rules.
//
// # Durations
//
// Durations are time.Duration in Go and whole milliseconds on the wire
// (the `_ms` fields); a positive duration below a millisecond is rounded
// up, so it never reads as "use the default".
//
// # Durability
//
// Each job has a Durability level that decides what can lose it:
// DurabilityFull (the default) survives a crash of the server and a power
// loss; DurabilityProcess survives a crash of the server, but a power loss
// or OS crash can lose the last changes answered before it;
// DurabilityMemory is fastest and lost on any restart of the server. Set it
// per job with EnqueueParams.Durability, or per queue with
// SetQueueDurability for the jobs that name none.
//
// # Delivery
//
// Delivery is at least once: a job whose worker dies or stalls past its
// lease is handed out again with a higher fencing token (Lease.Token), so
// handlers should be idempotent.
package client
