package httpapi

import (
	"context"
	"errors"
	"net/http"
	"time"

	"github.com/spoolq/spool/internal/engine"
	"github.com/spoolq/spool/internal/httpapi/wire"
	"github.com/spoolq/spool/internal/job"
)

type fetchJSON struct {
	Queues  []string `json:"queues"`
	Max     *int     `json:"max"`
	WaitMS  int64    `json:"wait_ms"`
	LeaseMS *int64   `json:"lease_ms"`
	Worker  string   `json:"worker"`
	// ConsumerGroup takes the jobs of that consumer group of each queue.
	ConsumerGroup *string `json:"consumer_group"`
	// Group takes the jobs of that group alone (a job's group, not a
	// consumer group).
	Group *string `json:"group"`
	// Runs lets a free group of an ordered queue give a run of its jobs.
	Runs bool `json:"runs"`
	// MaxGroups bounds the groups of each queue that give the fetch jobs.
	MaxGroups *int `json:"max_groups"`
}

// releaseTimeout bounds the hand-back of jobs claimed for a caller that
// left before its answer.
const releaseTimeout = 5 * time.Second

// fetchQueues are the queues a fetch names, for its route's scope.
func fetchQueues(in *fetchJSON) []string { return in.Queues }

func (a *API) fetch(w http.ResponseWriter, r *http.Request, in *fetchJSON) {
	req := engine.FetchRequest{Queues: in.Queues, Wait: millis(in.WaitMS), Worker: in.Worker, Runs: in.Runs}
	if g := in.ConsumerGroup; g != nil {
		if *g == "" {
			a.writeError(w, r, job.Invalid("consumer_group", "must be a consumer group name; leave the field out for the queues' own jobs"))
			return
		}
		req.ConsumerGroup = *g
	}
	var leaseMS int64
	if err := errors.Join(
		optional(in.Max, &req.Max, fieldName, "max", "must be between 1 and %d", engine.MaxFetch),
		optional(in.LeaseMS, &leaseMS, fieldName, "lease_ms", leaseRule, engine.MinLease.Milliseconds(), engine.MaxLease.Milliseconds()),
		optional(in.Group, &req.Group, fieldName, "group", "must be 1-%d bytes", engine.MaxGroupBytes),
		optional(in.MaxGroups, &req.MaxGroups, fieldName, "max_groups", "must be between 1 and %d", engine.MaxFetch),
	); err != nil {
		a.writeError(w, r, err)
		return
	}
	req.LeaseDuration = millis(leaseMS)
	jobs, err := a.engine.Fetch(r.Context(), req)
	if err != nil {
		a.writeError(w, r, err)
		return
	}
	if r.Context().Err() != nil && len(jobs) > 0 {
		// The caller is gone: hand its jobs back at once rather than let
		// them wait out their leases.
		a.releaseAbandoned(jobs)
		return
	}
	wire.WriteJobs(w, jobs, "")
}

func (a *API) releaseAbandoned(jobs []*job.Job) {
	items := make([]job.ReleaseItem, len(jobs))
	for i, j := range jobs {
		items[i] = job.ReleaseItem{ID: j.ID, Token: j.LeaseToken}
	}
	ctx, cancel := context.WithTimeout(context.Background(), releaseTimeout)
	defer cancel()
	if _, err := a.engine.Release(ctx, items); err != nil {
		a.opts.Logger.Warn("release jobs of a departed fetch; they return when their leases end", "jobs", len(jobs), "err", err)
	}
}
