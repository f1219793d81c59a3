package store

import (
	"errors"
	"testing"
	"time"

	"github.com/spoolq/spool/internal/job"
)

func TestConsumerGroupSince(t *testing.T) {
	t.Parallel()
	from := time.Date(2026, 11, 24, 12, 0, 0, 0, time.UTC)
	for _, c := range []struct {
		start    job.ConsumerGroupStart
		wantFrom time.Time
		wantNone bool
		wantErr  bool
	}{
		{job.StartBeginning, time.Time{}, false, false},
		{job.StartNew, time.Time{}, true, false},
		{job.StartAt, from, false, false},
		{job.ConsumerGroupStart(9), time.Time{}, false, true},
	} {
		p := ConsumerGroupParams{Queue: "q", Name: "g", Start: c.start, From: from}
		got, none, err := p.Since()
		var input *job.InputError
		if !got.Equal(c.wantFrom) || none != c.wantNone || c.wantErr != (err != nil) || (err != nil && !errors.As(err, &input)) {
			t.Errorf("start %d: Since() = %v, %v, %v", c.start, got, none, err)
		}
	}
}
