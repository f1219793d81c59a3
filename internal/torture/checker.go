package torture

import (
	"net/http"
	"sort"
)

// Summary is what Check found in one history.
type Summary struct {
	// Enqueued counts jobs whose enqueue was answered 2xx at least once.
	Enqueued int `json:"enqueued"`
	// EnqueueUnknown counts jobs with at least one enqueue call whose
	// outcome was unknown (the connection broke).
	EnqueueUnknown int `json:"enqueue_unknown"`
	// UnknownRecovered counts those of EnqueueUnknown that a retry later
	// confirmed with a 2xx.
	UnknownRecovered int `json:"unknown_recovered"`
	// UnknownAlreadyStored counts those of UnknownRecovered whose retry was
	// answered duplicate: the call cut short had stored the job.
	UnknownAlreadyStored int `json:"unknown_already_stored"`
	// RecoveredShare is UnknownRecovered / EnqueueUnknown (1 when there
	// were none).
	RecoveredShare float64 `json:"recovered_share"`
	// Delivered counts jobs handed out at least once; Deliveries counts
	// every hand-out.
	Delivered  int `json:"delivered"`
	Deliveries int `json:"deliveries"`
	// Lost counts jobs whose enqueue was answered 2xx but that were never
	// handed out.
	Lost int `json:"lost"`
	// Duplicates counts hand-outs beyond the first that no retry or
	// abandoned lease asked for.
	Duplicates int `json:"duplicates"`
	// DuplicateBound is the sum, over the kills, of the leases outstanding
	// when the server was killed: at-least-once delivery allows at most
	// that many duplicates.
	DuplicateBound int `json:"duplicate_bound"`
	// StaleAcksAccepted counts acks, fails and extends answered 2xx although
	// a hand-out with a higher token had been answered before they were
	// sent.
	StaleAcksAccepted int `json:"stale_acks_accepted"`
	// StaleAcksRefused counts the calls of the same kind answered 409
	// lease_lost: how often the history put the fencing to the test.
	StaleAcksRefused int `json:"stale_acks_refused"`
	// DoubleAcks counts successful finishing calls (acks, and fails that
	// ended the job) beyond the first per job.
	DoubleAcks int `json:"double_acks"`
	// AckedRedelivered counts jobs handed out again, with a higher token,
	// after an ack of an older token was answered 2xx.
	AckedRedelivered int `json:"acked_redelivered"`
	// TokenReuse counts hand-outs whose token was not above every earlier
	// hand-out's token of the same job: the server forgot a lease it had
	// answered (a fencing token must grow with every hand-out).
	TokenReuse int `json:"token_reuse"`
	// Unexpected counts jobs handed out that no one ever enqueued.
	Unexpected int `json:"unexpected"`
	// RefusedButStored counts jobs whose every enqueue before the first 2xx
	// was refused for sure (an error answer, no unknown outcome), yet
	// which the server had stored: its retry was answered duplicate, or it
	// was handed out or listed without ever being answered 2xx.
	RefusedButStored int `json:"refused_but_stored"`
	// Missing counts jobs answered 2xx that the final listing lacks;
	// Unfinished those it lists in a state other than completed or dead.
	// Both stay 0 when Check was given no listing.
	Missing    int `json:"missing"`
	Unfinished int `json:"unfinished"`
	// Kills counts the kill events.
	Kills int `json:"kills"`
	// Errors counts failed calls by error code ("transport" for calls
	// that never reached the server).
	Errors map[string]int `json:"errors,omitempty"`
}

// jobTrack is what Check knows about one job while it walks the history.
type jobTrack struct {
	sent, ok, unknown bool
	dupConfirmed      bool // some 2xx said duplicate
	refusedBeforeOK   bool // a definite refusal came before the first 2xx
	unknownBeforeOK   bool // an unknown outcome came before the first 2xx
	firstOKDuplicate  bool
	deliveries        int
	maxToken          int64
	expected          int // hand-outs beyond the first that were asked for
	finished          int // successful finishing calls
	ackedToken        int64
	redeliveredAck    bool
	lease             int64 // latest token handed out
	leaseOpen         bool  // that lease is neither settled nor superseded
}

// callKey identifies an ack, fail or extend call in flight.
type callKey struct {
	op    Op
	job   string
	token int64
}

// Check walks a history in Seq order and counts what went wrong. final,
// when not nil, maps every job the server listed at the end to its state;
// it adds the Missing and Unfinished counts. Check is a pure function: it
// reads its arguments only.
func Check(events []Event, final map[string]string) Summary {
	evs := append([]Event(nil), events...)
	sort.SliceStable(evs, func(i, j int) bool { return evs[i].Seq < evs[j].Seq })

	s := Summary{Errors: map[string]int{}}
	jobs := map[string]*jobTrack{}
	track := func(id string) *jobTrack {
		t := jobs[id]
		if t == nil {
			t = &jobTrack{}
			jobs[id] = t
		}
		return t
	}
	stale := map[callKey][]bool{} // per call in flight: its token was stale when sent
	open := 0                     // leases handed out and not yet settled or superseded
	afterKill := false            // between a kill and the next ready
	settle := func(t *jobTrack, token int64) {
		if t.leaseOpen && t.lease == token {
			t.leaseOpen = false
			open--
		}
	}

	for _, e := range evs {
		if e.Type == TypeFail || e.Type == TypeInfo {
			code := e.Code
			if code == "" {
				code = "transport"
			}
			if e.Type == TypeInfo {
				code = "unknown_outcome"
			}
			s.Errors[string(e.Op)+":"+code]++
		}
		switch e.Op {
		case OpKill:
			s.Kills++
			s.DuplicateBound += open
			afterKill = true
		case OpReady:
			afterKill = false
		case OpEnqueue:
			t := track(e.Job)
			switch e.Type {
			case TypeInvoke:
				t.sent = true
			case TypeOK:
				if !t.ok {
					t.firstOKDuplicate = e.Duplicate
				}
				t.ok = true
				t.dupConfirmed = t.dupConfirmed || e.Duplicate
			case TypeFail:
				if !t.ok {
					t.refusedBeforeOK = true
				}
			case TypeInfo:
				t.unknown = true
				if !t.ok {
					t.unknownBeforeOK = true
				}
			}
		case OpFetch:
			if e.Type != TypeOK {
				continue
			}
			t := track(e.Job)
			t.deliveries++
			if t.ackedToken != 0 && e.Token > t.ackedToken {
				t.redeliveredAck = true
			}
			if t.deliveries > 1 && e.Token <= t.maxToken {
				s.TokenReuse++
			}
			t.maxToken = max(t.maxToken, e.Token)
			if t.leaseOpen {
				open-- // superseded: that lease ran out
			}
			t.lease, t.leaseOpen = e.Token, true
			open++
			if afterKill {
				// Answered before the kill but recorded after it: it was
				// outstanding at the kill too.
				s.DuplicateBound++
			}
		case OpAbandon:
			t := track(e.Job)
			t.expected++
			settle(t, e.Token)
		case OpAck, OpFail, OpExtend:
			t := track(e.Job)
			key := callKey{e.Op, e.Job, e.Token}
			if e.Type == TypeInvoke {
				stale[key] = append(stale[key], t.maxToken > e.Token)
				continue
			}
			wasStale := false
			if q := stale[key]; len(q) > 0 {
				wasStale, stale[key] = q[0], q[1:]
			}
			switch e.Type {
			case TypeOK:
				if wasStale {
					s.StaleAcksAccepted++
				}
				switch {
				case e.Op == OpAck:
					t.finished++
					if t.ackedToken == 0 || e.Token < t.ackedToken {
						t.ackedToken = e.Token
					}
					settle(t, e.Token)
				case e.Op == OpFail && e.State == "retrying":
					t.expected++
					settle(t, e.Token)
				case e.Op == OpFail:
					t.finished++
					settle(t, e.Token)
				}
			case TypeFail:
				if wasStale && e.Status == http.StatusConflict {
					s.StaleAcksRefused++
				}
				if e.Op != OpExtend && (e.Status == http.StatusConflict || e.Status == http.StatusNotFound) {
					settle(t, e.Token)
				}
			case TypeInfo:
				if e.Op == OpFail && e.Retry {
					t.expected++ // either retried or its lease runs out
				}
			}
		}
	}

	for id, t := range jobs {
		if t.ok {
			s.Enqueued++
			if t.deliveries == 0 {
				s.Lost++
			}
		}
		if t.unknown {
			s.EnqueueUnknown++
			if t.ok {
				s.UnknownRecovered++
				if t.dupConfirmed {
					s.UnknownAlreadyStored++
				}
			}
		}
		if t.deliveries > 0 {
			s.Delivered++
			s.Deliveries += t.deliveries
			if !t.sent {
				s.Unexpected++
			}
			s.Duplicates += max(0, t.deliveries-1-t.expected)
		}
		s.DoubleAcks += max(0, t.finished-1)
		if t.redeliveredAck {
			s.AckedRedelivered++
		}
		state, listed := final[id]
		refused := t.refusedBeforeOK && !t.unknownBeforeOK
		switch {
		case t.ok && refused && t.firstOKDuplicate:
			s.RefusedButStored++
		case !t.ok && refused && (t.deliveries > 0 || listed):
			s.RefusedButStored++
		}
		if final != nil && t.ok {
			switch {
			case !listed:
				s.Missing++
			case state != "completed" && state != "dead":
				s.Unfinished++
			}
		}
	}
	s.RecoveredShare = 1
	if s.EnqueueUnknown > 0 {
		s.RecoveredShare = float64(s.UnknownRecovered) / float64(s.EnqueueUnknown)
	}
	if len(s.Errors) == 0 {
		s.Errors = nil
	}
	return s
}
