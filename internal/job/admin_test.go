package job

import (
	"errors"
	"testing"
)

func TestActionsByHand(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		state                       State
		cancel                      Cancel
		cancelOK, retryOK, deleteOK bool
		bulkRetryOK, bulkDeleteOK   bool
	}{
		{StateScheduled, CancelNow, true, true, true, true, true},
		{StateAvailable, CancelNow, true, false, true, false, true},
		{StateActive, CancelRequest, true, false, false, false, false},
		{StateRetrying, CancelNow, true, true, true, true, true},
		{StateCompleted, CancelNone, false, false, true, false, true},
		{StateDead, CancelNone, false, true, true, true, true},
		{StateCancelled, CancelNone, true, true, true, true, true},
		{State("lost"), CancelNow, true, false, true, false, false},
	} {
		cancel, err := CancelOf(c.state)
		if cancel != c.cancel || (err == nil) != c.cancelOK {
			t.Errorf("cancel %s: %v, %v; want %v, ok %v", c.state, cancel, err, c.cancel, c.cancelOK)
		}
		for _, check := range []struct {
			name string
			err  error
			ok   bool
		}{
			{"retry", CheckRetry(c.state), c.retryOK},
			{"delete", CheckDelete(c.state), c.deleteOK},
			{"retry every", CheckBulk(true, c.state), c.bulkRetryOK},
			{"delete every", CheckBulk(false, c.state), c.bulkDeleteOK},
			{"cancel", err, c.cancelOK},
		} {
			if (check.err == nil) != check.ok {
				t.Errorf("%s %s: %v, want ok %v", check.name, c.state, check.err, check.ok)
			}
			if check.err != nil && !errors.Is(check.err, ErrInvalidState) {
				t.Errorf("%s %s: %v, want ErrInvalidState", check.name, c.state, check.err)
			}
		}
	}
}
