package store

import (
	"encoding/base64"
	"fmt"
	"strconv"
	"strings"

	"github.com/spoolq/spool/internal/job"
)

// SeqCursor is a listing cursor that stands for the seq of a page's last
// job, marked with a store's prefix (such as "s1:") so that a cursor from
// another store or format is refused rather than misread. Cursors are
// opaque to callers: base64url text without padding.
type SeqCursor string

// Encode returns the cursor of seq.
func (prefix SeqCursor) Encode(seq int64) string {
	return base64.RawURLEncoding.EncodeToString([]byte(string(prefix) + strconv.FormatInt(seq, 10)))
}

// Decode returns the seq a cursor stands for; an empty cursor is 0. A
// cursor this prefix did not make is an error wrapping a *job.InputError
// for the field "cursor".
func (prefix SeqCursor) Decode(c string) (int64, error) {
	if c == "" {
		return 0, nil
	}
	raw, err := base64.RawURLEncoding.DecodeString(c)
	if err == nil {
		if rest, ok := strings.CutPrefix(string(raw), string(prefix)); ok {
			if seq, perr := strconv.ParseInt(rest, 10, 64); perr == nil && seq >= 0 {
				return seq, nil
			}
		}
	}
	return 0, job.Invalid("cursor", "is not a cursor this server issued")
}

// Start reads a listing's parameters as every store does: it checks the
// filters (JobListParams.Check) and returns the seq the cursor stands for
// and the page size; a bad filter or cursor is an error wrapping a
// *job.InputError.
func (prefix SeqCursor) Start(p *job.ListParams) (after int64, size int, err error) {
	if err := p.Check(); err != nil {
		return 0, 0, fmt.Errorf("list jobs: %w", err)
	}
	if after, err = prefix.Decode(p.Cursor); err != nil {
		return 0, 0, fmt.Errorf("list jobs: %w", err)
	}
	return after, p.PageSize(), nil
}

// Page makes the listing page of jobs, read with their seqs for one more
// than size: the first size jobs, and the cursor after the last of them
// when more followed.
func (prefix SeqCursor) Page(jobs []*job.Job, seqs []int64, size int) *job.ListPage {
	page := &job.ListPage{Jobs: jobs}
	if len(jobs) > size {
		page.Jobs = jobs[:size]
		page.Next = prefix.Encode(seqs[size-1])
	}
	return page
}
