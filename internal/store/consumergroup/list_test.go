package consumergroup

import (
	"context"
	"errors"
	"testing"

	"github.com/spoolq/spool/internal/job"
)

// fakeReader serves groups and adds one available job to each lane.
type fakeReader struct {
	groups       []job.ConsumerGroup
	groupsErr    error
	standingErr  error
	standingSeen int
}

func (f *fakeReader) Groups(context.Context, string, *job.ConsumerGroupListParams) ([]job.ConsumerGroup, error) {
	return f.groups, f.groupsErr
}

func (f *fakeReader) Standing(_ context.Context, gs []job.ConsumerGroup) error {
	f.standingSeen++
	for i := range gs {
		gs[i].Counts[job.StateAvailable]++
	}
	return f.standingErr
}

func TestList(t *testing.T) {
	fail := errors.New("boom")
	cases := []struct {
		name         string
		r            fakeReader
		want         int
		wantErr      error
		wantStanding int
	}{
		{name: "no groups reads no lanes", want: 0},
		{name: "groups get every state", r: fakeReader{groups: []job.ConsumerGroup{{Queue: "q", Name: "a"}, {Queue: "q", Name: "b"}}}, want: 2, wantStanding: 1},
		{name: "a failed read", r: fakeReader{groupsErr: fail}, wantErr: fail},
		{name: "a failed standing", r: fakeReader{groups: []job.ConsumerGroup{{Queue: "q", Name: "a"}}, standingErr: fail}, wantErr: fail, wantStanding: 1},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			gs, err := List(context.Background(), &c.r, "q", nil)
			if !errors.Is(err, c.wantErr) || c.r.standingSeen != c.wantStanding {
				t.Fatalf("err %v, standing read %d times; want %v, %d", err, c.r.standingSeen, c.wantErr, c.wantStanding)
			}
			if c.wantErr != nil {
				return
			}
			if gs == nil || len(gs) != c.want {
				t.Fatalf("got %v, want %d groups", gs, c.want)
			}
			for _, g := range gs {
				if len(g.Counts) != len(job.States) || g.Counts[job.StateAvailable] != 1 || g.Counts[job.StateDead] != 0 {
					t.Fatalf("group %s: counts %v", g.Name, g.Counts)
				}
			}
		})
	}
}
