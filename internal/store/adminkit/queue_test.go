package adminkit

import (
	"errors"
	"testing"
	"time"

	"github.com/spoolq/spool/internal/job"
)

func TestIndexCoversEveryState(t *testing.T) {
	if len(job.States) != NumStates {
		t.Fatalf("NumStates = %d, job.States has %d", NumStates, len(job.States))
	}
	for i, s := range job.States {
		if got := Index(s); got != i {
			t.Errorf("Index(%s) = %d, want %d", s, got, i)
		}
	}
}

func TestRecordInfo(t *testing.T) {
	oldest := time.Unix(100, 0).UTC()
	for _, tc := range []struct {
		name string
		rec  Record
		want job.Durability
	}{
		{"unset durability is full", Record{Name: "a"}, job.DurabilityFull},
		{"set durability is kept", Record{Name: "b", Queue: Queue{Durability: job.DurabilityProcess}}, job.DurabilityProcess},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.rec.Paused = true
			tc.rec.Settings.MaxWait = time.Second
			tc.rec.Counts[Index(job.StateDead)] = 3
			info := tc.rec.Info(oldest)
			if info.Name != tc.rec.Name || !info.Paused || info.Durability != tc.want || info.Settings.MaxWait != time.Second ||
				!info.OldestAvailable.Equal(oldest) {
				t.Fatalf("Info = %+v", info)
			}
			if len(info.Counts) != NumStates || info.Counts[job.StateDead] != 3 || info.Counts[job.StateAvailable] != 0 {
				t.Fatalf("Counts = %v, want every state, 3 dead", info.Counts)
			}
			if d := tc.rec.Defaults(); d.Durability != tc.want || d.Settings != tc.rec.Settings {
				t.Fatalf("Defaults = %+v", d)
			}
		})
	}
}

func TestCheckDurability(t *testing.T) {
	for _, tc := range []struct {
		d      job.Durability
		memory bool
		ok     bool
	}{
		{job.DurabilityFull, false, true},
		{job.DurabilityProcess, false, true},
		{job.DurabilityMemory, true, true},
		{job.DurabilityMemory, false, false},
		{"", true, false},
		{"disk", true, false},
	} {
		err := CheckDurability(tc.d, tc.memory, "here")
		var in *job.InputError
		if (err == nil) != tc.ok || (err != nil && (!errors.As(err, &in) || in.Field != "durability")) {
			t.Errorf("CheckDurability(%q, %v) = %v, want ok %v or an input error on durability", tc.d, tc.memory, err, tc.ok)
		}
	}
}
