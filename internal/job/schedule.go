package job

import (
	"encoding/json"
	"time"
)

// Schedule is one cron schedule as the store keeps it.
type Schedule struct {
	// Name identifies the schedule.
	Name string
	// Cron and Timezone, or Every, say when it fires (see package
	// schedule); the store keeps them as given.
	Cron     string
	Timezone string
	Every    time.Duration
	// Misfire is the policy for missed ticks: skip, run_once or catch_up.
	Misfire string
	// MaxCatchUp bounds the jobs catch_up fires at once.
	MaxCatchUp int
	// Job is the template of the jobs it enqueues, in the wire form of an
	// enqueue body, kept byte for byte.
	Job json.RawMessage
	// Paused schedules fire nothing.
	Paused bool
	// CreatedAt and UpdatedAt are when it was created and last redefined,
	// paused or resumed.
	CreatedAt time.Time
	UpdatedAt time.Time
	// LastTick is the newest tick handled (fired or skipped); ticks after
	// it and not after now are due.
	LastTick time.Time
	// LastRunAt is when it last enqueued a job (zero: never), and
	// LastJobID that job's id.
	LastRunAt time.Time
	LastJobID string
	// NextRunAt is its next tick, zero when it has none.
	NextRunAt time.Time
}
