package job

import "strings"

// Consumer groups. Each consumer group of a queue receives every job of
// the queue on its own: the store gives the consumer group a copy of each
// job, a job like any other with its own leases, attempts, retries and
// outcome, in the consumer group's lane, a queue of its own named
// LaneName(queue, consumerGroup). The copy's id is CopyID(id,
// consumerGroup). Names and ids never hold LaneSep, so neither a lane nor
// a copy can be mistaken for a queue or a job of a client's own.

// LaneSep separates a queue from a consumer group in a lane's name, and a
// job's id from the consumer group in its copy's id.
const LaneSep = "@"

// LaneName is the name of the lane of consumer group consumerGroup of queue.
func LaneName(queue, consumerGroup string) string { return queue + LaneSep + consumerGroup }

// SplitLane splits a lane's name into its queue and consumer group; ok is false
// for the name of a queue that is no lane.
func SplitLane(name string) (queue, consumerGroup string, ok bool) {
	return strings.Cut(name, LaneSep)
}

// CopyID is the id of the copy of job id in consumer group consumerGroup.
func CopyID(id, consumerGroup string) string { return id + LaneSep + consumerGroup }

// SplitCopyID splits the id of a copy into the id of the job it copies
// and its consumer group; ok is false for the id of a job that is no copy.
func SplitCopyID(id string) (original, consumerGroup string, ok bool) {
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
