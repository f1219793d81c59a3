package session

import (
	"errors"
	"testing"
	"time"

	"github.com/spoolq/spool/internal/job"
)

func TestCreateParamsValidate(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 11, 24, 12, 0, 0, 0, time.UTC)
	for _, c := range []struct {
		name    string
		expires time.Time
		cap     int
		ok      bool
	}{
		{"live with a cap", now.Add(time.Hour), 50, true},
		{"cap of one", now.Add(time.Nanosecond), 1, true},
		{"expires at now", now, 50, false},
		{"expired", now.Add(-time.Hour), 50, false},
		{"no cap", now.Add(time.Hour), 0, false},
		{"negative cap", now.Add(time.Hour), -1, false},
	} {
		p := CreateParams{Session: Session{IDHash: "h", ExpiresAt: c.expires}, MaxPerToken: c.cap, Now: now}
		err := p.Validate()
		var input *job.InputError
		if c.ok != (err == nil) || (err != nil && (!errors.As(err, &input) || input.Field != "session")) {
			t.Errorf("%s: Validate() = %v", c.name, err)
		}
	}
}
