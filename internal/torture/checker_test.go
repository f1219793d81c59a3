package torture

import (
	"bytes"
	"reflect"
	"testing"
)

// hist builds a history in order, numbering the events.
type hist struct{ evs []Event }

func (h *hist) add(e Event) *hist {
	e.Seq = int64(len(h.evs)) + 1
	h.evs = append(h.evs, e)
	return h
}

func (h *hist) enqueue(id string, outcome Type, dup bool) *hist {
	h.add(Event{Op: OpEnqueue, Type: TypeInvoke, Job: id})
	e := Event{Op: OpEnqueue, Type: outcome, Job: id, Duplicate: dup}
	if outcome == TypeFail {
		e.Status, e.Code = 507, "storage_full"
	}
	return h.add(e)
}

func (h *hist) fetch(id string, token int64) *hist {
	return h.add(Event{Op: OpFetch, Type: TypeOK, Job: id, Token: token, Attempt: int(token)})
}

func (h *hist) call(op Op, id string, token int64, outcome Type, state string) *hist {
	h.add(Event{Op: op, Type: TypeInvoke, Job: id, Token: token, Retry: op == OpFail})
	e := Event{Op: op, Type: outcome, Job: id, Token: token, State: state, Retry: op == OpFail}
	if outcome == TypeFail {
		e.Status, e.Code = 409, "lease_lost"
	}
	return h.add(e)
}

func (h *hist) ack(id string, token int64, outcome Type) *hist {
	return h.call(OpAck, id, token, outcome, "completed")
}

func TestCheckCleanHistory(t *testing.T) {
	h := (&hist{}).
		enqueue("a", TypeOK, false).fetch("a", 1).ack("a", 1, TypeOK).
		enqueue("b", TypeOK, false).fetch("b", 1).call(OpFail, "b", 1, TypeOK, "retrying").
		fetch("b", 2).call(OpExtend, "b", 2, TypeOK, "").ack("b", 2, TypeOK)
	s := Check(h.evs, map[string]string{"a": "completed", "b": "completed"})
	want := Summary{Enqueued: 2, Delivered: 2, Deliveries: 3, RecoveredShare: 1}
	if !reflect.DeepEqual(s, want) {
		t.Fatalf("summary %+v, want %+v", s, want)
	}
}

func TestCheckCountsEachAnomaly(t *testing.T) {
	cases := []struct {
		name  string
		h     *hist
		final map[string]string
		want  func(s Summary) bool
	}{
		{"lost", (&hist{}).enqueue("a", TypeOK, false), nil,
			func(s Summary) bool { return s.Lost == 1 && s.Enqueued == 1 }},
		{"lost enqueue after an unknown outcome", (&hist{}).enqueue("a", TypeInfo, false).enqueue("a", TypeOK, true), nil,
			func(s Summary) bool { return s.Lost == 1 && s.UnknownRecovered == 1 && s.UnknownAlreadyStored == 1 }},
		{"duplicate", (&hist{}).enqueue("a", TypeOK, false).fetch("a", 1).fetch("a", 2).ack("a", 2, TypeOK), nil,
			func(s Summary) bool { return s.Duplicates == 1 && s.Deliveries == 2 }},
		{"abandoned lease is no duplicate", (&hist{}).enqueue("a", TypeOK, false).fetch("a", 1).
			add(Event{Op: OpAbandon, Type: TypeOK, Job: "a", Token: 1}).fetch("a", 2).ack("a", 2, TypeOK), nil,
			func(s Summary) bool { return s.Duplicates == 0 }},
		{"fail with unknown outcome is no duplicate", (&hist{}).enqueue("a", TypeOK, false).fetch("a", 1).
			call(OpFail, "a", 1, TypeInfo, "").fetch("a", 2).ack("a", 2, TypeOK), nil,
			func(s Summary) bool { return s.Duplicates == 0 }},
		{"stale ack accepted", (&hist{}).enqueue("a", TypeOK, false).fetch("a", 1).fetch("a", 2).ack("a", 1, TypeOK), nil,
			func(s Summary) bool { return s.StaleAcksAccepted == 1 && s.AckedRedelivered == 0 }},
		{"stale extend accepted", (&hist{}).enqueue("a", TypeOK, false).fetch("a", 1).fetch("a", 2).
			call(OpExtend, "a", 1, TypeOK, ""), nil,
			func(s Summary) bool { return s.StaleAcksAccepted == 1 }},
		{"stale ack refused", (&hist{}).enqueue("a", TypeOK, false).fetch("a", 1).fetch("a", 2).ack("a", 1, TypeFail).ack("a", 2, TypeOK), nil,
			func(s Summary) bool { return s.StaleAcksAccepted == 0 && s.StaleAcksRefused == 1 && s.DoubleAcks == 0 }},
		{"double ack", (&hist{}).enqueue("a", TypeOK, false).fetch("a", 1).ack("a", 1, TypeOK).ack("a", 1, TypeOK), nil,
			func(s Summary) bool { return s.DoubleAcks == 1 }},
		{"ack then dead", (&hist{}).enqueue("a", TypeOK, false).fetch("a", 1).ack("a", 1, TypeOK).call(OpFail, "a", 1, TypeOK, "dead"), nil,
			func(s Summary) bool { return s.DoubleAcks == 1 }},
		{"acked job redelivered", (&hist{}).enqueue("a", TypeOK, false).fetch("a", 1).ack("a", 1, TypeOK).fetch("a", 2), nil,
			func(s Summary) bool { return s.AckedRedelivered == 1 && s.StaleAcksAccepted == 0 }},
		{"token reused", (&hist{}).enqueue("a", TypeOK, false).fetch("a", 2).fetch("a", 2).ack("a", 2, TypeOK), nil,
			func(s Summary) bool { return s.TokenReuse == 1 }},
		{"unexpected", (&hist{}).fetch("ghost", 1), nil,
			func(s Summary) bool { return s.Unexpected == 1 && s.Delivered == 1 }},
		{"refused but stored, then confirmed", (&hist{}).enqueue("a", TypeFail, false).enqueue("a", TypeOK, true), nil,
			func(s Summary) bool { return s.RefusedButStored == 1 }},
		{"refused but delivered", (&hist{}).enqueue("a", TypeFail, false).fetch("a", 1), nil,
			func(s Summary) bool { return s.RefusedButStored == 1 && s.Unexpected == 0 }},
		{"refused but listed", (&hist{}).enqueue("a", TypeFail, false), map[string]string{"a": "available"},
			func(s Summary) bool { return s.RefusedButStored == 1 }},
		{"refused then stored by retry", (&hist{}).enqueue("a", TypeFail, false).enqueue("a", TypeOK, false), nil,
			func(s Summary) bool { return s.RefusedButStored == 0 }},
		{"unknown outcome never recovered", (&hist{}).enqueue("a", TypeInfo, false), nil,
			func(s Summary) bool { return s.EnqueueUnknown == 1 && s.UnknownRecovered == 0 && s.RecoveredShare == 0 }},
		{"missing and unfinished", (&hist{}).enqueue("a", TypeOK, false).enqueue("b", TypeOK, false).fetch("a", 1).fetch("b", 1),
			map[string]string{"b": "active"},
			func(s Summary) bool { return s.Missing == 1 && s.Unfinished == 1 }},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if s := Check(c.h.evs, c.final); !c.want(s) {
				t.Fatalf("summary %+v", s)
			}
		})
	}
}

func TestCheckBoundsDuplicatesByLeasesOutstandingAtKills(t *testing.T) {
	h := (&hist{}).
		enqueue("a", TypeOK, false).enqueue("b", TypeOK, false).enqueue("c", TypeOK, false).enqueue("d", TypeOK, false).
		fetch("a", 1).fetch("b", 1).ack("b", 1, TypeOK). // a outstanding, b settled
		fetch("c", 1).call(OpAck, "c", 1, TypeInfo, ""). // c's ack outcome unknown: still outstanding
		add(Event{Op: OpKill, Type: TypeOK}).
		fetch("d", 1). // answered before the kill, recorded after it
		add(Event{Op: OpReady, Type: TypeOK}).
		ack("d", 1, TypeOK).
		fetch("a", 2).ack("a", 2, TypeOK).
		fetch("c", 2).ack("c", 2, TypeOK)
	s := Check(h.evs, nil)
	if s.Kills != 1 || s.DuplicateBound != 3 || s.Duplicates != 2 {
		t.Fatalf("kills %d, bound %d, duplicates %d; want 1, 3, 2", s.Kills, s.DuplicateBound, s.Duplicates)
	}
	if s.Lost != 0 || s.StaleAcksAccepted != 0 || s.DoubleAcks != 0 {
		t.Fatalf("summary %+v", s)
	}
}

func TestCheckCountsErrorsByCode(t *testing.T) {
	h := (&hist{}).enqueue("a", TypeFail, false).enqueue("a", TypeInfo, false).enqueue("a", TypeOK, true)
	s := Check(h.evs, nil)
	want := map[string]int{"enqueue:storage_full": 1, "enqueue:unknown_outcome": 1}
	if !reflect.DeepEqual(s.Errors, want) {
		t.Fatalf("errors %v, want %v", s.Errors, want)
	}
	// An unknown outcome between the refusal and the 2xx may have stored
	// the job, so the refusal is not blamed.
	if s.RefusedButStored != 0 {
		t.Fatalf("refused but stored %d, want 0", s.RefusedButStored)
	}
}

func TestHistoryRoundTripsThroughJSONL(t *testing.T) {
	var h History
	h.Add(Event{Op: OpEnqueue, Type: TypeInvoke, Job: "a"})
	h.Add(Event{Op: OpEnqueue, Type: TypeOK, Job: "a"})
	h.Add(Event{Op: OpFetch, Type: TypeOK, Job: "a", Token: 1, Attempt: 1})
	var buf bytes.Buffer
	if err := h.WriteJSONL(&buf); err != nil {
		t.Fatal(err)
	}
	evs, err := ReadJSONL(&buf)
	if err != nil {
		t.Fatal(err)
	}
	if len(evs) != 3 || evs[2].Seq != 3 || evs[2].Token != 1 {
		t.Fatalf("read back %+v", evs)
	}
	if s := Check(evs, nil); s.Enqueued != 1 || s.Delivered != 1 || s.Lost != 0 {
		t.Fatalf("summary %+v", s)
	}
}
