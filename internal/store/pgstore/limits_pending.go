package pgstore

import (
	"context"
	"errors"

	"github.com/spoolq/spool/internal/job"
)

// QueueSetLimits is not there yet on PostgreSQL.
func (s *Store) QueueSetLimits(ctx context.Context, name string, l job.Limits) error {
	return errors.New("set queue limits: not supported by this store yet")
}
