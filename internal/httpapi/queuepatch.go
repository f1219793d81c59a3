package httpapi

import (
	"net/http"
	"slices"

	"github.com/spoolq/spool/internal/job"
)

// The merge forms of a queue's settings and limits (PATCH, RFC 7396): a
// field sent with a value sets it, a field sent as null clears it, a
// field left out is kept. The handlers only read the body into a patch;
// job.SettingsPatch.Merge and job.LimitsPatch.Merge, run by the store in
// the transaction that writes their result, say what it means.

// change is the change a merge patch makes to the field at path: cleared
// when path is among nulls, set to conv of *v when v was sent, else left.
func change[W, T any](path string, nulls []string, v *W, conv func(W) T) job.Change[T] {
	switch {
	case slices.Contains(nulls, path):
		return job.Clear[T]()
	case v != nil:
		return job.Set(conv(*v))
	}
	return job.Change[T]{}
}

// same is the conversion of a wire value that the engine takes as it is.
func same[T any](v T) T { return v }

// patch is the settings patch that in, a merge-patch body with the null
// members nulls, makes.
func (in *settingsJSON) patch(nulls []string) job.SettingsPatch {
	return job.SettingsPatch{
		DeadLetterQueue:    change("dead_letter_queue", nulls, in.DeadLetterQueue, same[string]),
		MaxWait:            change("max_wait_ms", nulls, in.MaxWaitMS, millis),
		DefaultLease:       change("default_lease_ms", nulls, in.DefaultLeaseMS, millis),
		DefaultMaxAttempts: change("default_max_attempts", nulls, in.DefaultMaxAttempts, same[int]),
		DefaultDelay:       change("default_delay_ms", nulls, in.DefaultDelayMS, millis),
	}
}

// patch is the limits patch that in, a merge-patch body with the null
// members nulls, makes; a rate sent as an object merges member by member.
func (in *limitsJSON) patch(nulls []string) job.LimitsPatch {
	rate := func(field string, r *rateJSON) job.Change[job.RatePatch] {
		return change(field, nulls, r, func(r rateJSON) job.RatePatch {
			return job.RatePatch{
				Limit:  change(field+".limit", nulls, r.Limit, same[int]),
				Period: change(field+".period_ms", nulls, r.PeriodMS, millis),
			}
		})
	}
	return job.LimitsPatch{
		Rate:           rate("rate", in.Rate),
		MaxActive:      change("max_active", nulls, in.MaxActive, same[int]),
		GroupRate:      rate("group_rate", in.GroupRate),
		GroupMaxActive: change("group_max_active", nulls, in.GroupMaxActive, same[int]),
		Ordered:        change("ordered", nulls, in.Ordered, same[bool]),
	}
}

// patchQueueSettings changes the settings of a queue that the body names
// and keeps the others.
func (a *API) patchQueueSettings(w http.ResponseWriter, r *http.Request, in *settingsJSON, nulls []string) {
	q, err := a.engine.PatchSettings(r.Context(), r.PathValue("name"), in.patch(nulls))
	if err != nil {
		a.writeError(w, r, err)
		return
	}
	a.writeJSON(w, http.StatusOK, toQueueJSON(q))
}

// patchQueueLimits changes the limits of a queue that the body names and
// keeps the others.
func (a *API) patchQueueLimits(w http.ResponseWriter, r *http.Request, in *limitsJSON, nulls []string) {
	q, err := a.engine.PatchLimits(r.Context(), r.PathValue("name"), in.patch(nulls))
	if err != nil {
		a.writeError(w, r, err)
		return
	}
	a.writeJSON(w, http.StatusOK, toQueueJSON(q))
}
