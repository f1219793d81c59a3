package job

import "strings"

// Consumer groups. Each consumer group of a queue receives every job of
// the queue on its own: the store gives the group a copy of each job, a
// job like any other with its own leases, attempts, retries and outcome,
// in the group's lane, a queue of its own named LaneName(queue, group).
// The copy's id is CopyID(id, group). Names and ids never hold LaneSep,
// so neither a lane nor a copy can be mistaken for a queue or a job of a
// client's own.

// LaneSep separates a queue from a consumer group in a lane's name, and a
// job's id from the group in its copy's id.
const LaneSep = "@"

// LaneName is the name of the lane of consumer group group of queue.
func LaneName(queue, group string) string { return queue + LaneSep + group }

// SplitLane splits a lane's name into its queue and group; ok is false
// for the name of a queue that is no lane.
func SplitLane(name string) (queue, group string, ok bool) {
	return strings.Cut(name, LaneSep)
}

// CopyID is the id of the copy of job id in consumer group group.
func CopyID(id, group string) string { return id + LaneSep + group }

// SplitCopyID splits the id of a copy into the id of the job it copies
// and its group; ok is false for the id of a job that is no copy.
func SplitCopyID(id string) (original, group string, ok bool) {
	return strings.Cut(id, LaneSep)
}

// ValidJobID reports whether id may name a stored job: a name (see
// ValidName), or the id of a consumer group's copy of one. Clients
// choose only names.
func ValidJobID(id string) bool {
	if original, group, ok := SplitCopyID(id); ok {
		return ValidName(original) && ValidName(group)
	}
	return ValidName(id)
}
