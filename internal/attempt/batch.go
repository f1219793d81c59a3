package attempt

import (
	"errors"

	"github.com/spoolq/spool/internal/job"
)

// Batch is the items of a batch call that names jobs by id and lease
// token, each job once: a later item with the id of an earlier one is a
// repeat, refused as Repeat says.
type Batch struct {
	IDs    []string
	Tokens []int64
	// Pos is the batch position of each item of IDs.
	Pos []int
	// repeat maps the position of a repeated id to that of its first item.
	repeat map[int]int
	// index maps each id to its place in IDs.
	index map[string]int
}

// NewBatch is the batch of n items, item giving each one's id and token.
func NewBatch(n int, item func(i int) (string, int64)) *Batch {
	b := &Batch{IDs: make([]string, 0, n), Tokens: make([]int64, 0, n), Pos: make([]int, 0, n), index: make(map[string]int, n)}
	for i := range n {
		id, token := item(i)
		if k, ok := b.index[id]; ok {
			if b.repeat == nil {
				b.repeat = make(map[int]int)
			}
			b.repeat[i] = b.Pos[k]
			continue
		}
		b.index[id] = len(b.IDs)
		b.IDs, b.Tokens, b.Pos = append(b.IDs, id), append(b.Tokens, token), append(b.Pos, i)
	}
	return b
}

// Index is the place in IDs of id, which must be one of them.
func (b *Batch) Index(id string) int { return b.index[id] }

// Len is how many items the batch has, repeats included.
func (b *Batch) Len() int { return len(b.IDs) + len(b.repeat) }

// Repeats calls set with the position and error of each repeated item,
// given by errOf the error of every first item (nil when it held its
// lease): job.ErrNotFound when the first found no job, else
// job.ErrLeaseLost, since after the first the job is no longer active
// under that lease.
func (b *Batch) Repeats(errOf func(pos int) error, set func(pos int, err error)) {
	for i, f := range b.repeat {
		set(i, Miss(!errors.Is(errOf(f), job.ErrNotFound)))
	}
}

// Miss is the error of an item that does not hold its job's lease:
// job.ErrLeaseLost when the job exists, job.ErrNotFound when it does not.
func Miss(exists bool) error {
	if exists {
		return job.ErrLeaseLost
	}
	return job.ErrNotFound
}
