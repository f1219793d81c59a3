package sqlitestore

import (
	"encoding/binary"
	"slices"
	"time"

	"github.com/spoolq/spool/internal/job"
)

// Flow control in the embedded store. The writer owns the state: active
// counts come from the lease table (per queue and per group), rate logs
// (job.StartLog) live in memory. A queue whose jobs have groups keeps, in
// place of one ready window, a small window per group with available
// jobs and a ring of those groups; a claim goes round the ring, one job of
// each group a turn, skipping the groups its limits hold. Groups the
// memory does not hold (after a start, or past maxGroupStates) are found
// by walking the jobs_group_claim index (refill.go). A job without a group
// is stored with the empty group ("") in such a queue, so that it takes
// its turn like any group.

// Bounds of the groups a queue keeps in memory.
const (
	// groupWindow is the size of a group's window: a refill reads this
	// many of its jobs at once. A group that needs refills again and
	// again gets a window twice as large at each, up to maxGroupWindow,
	// while its queue has no more than growGroupsUpTo groups in the ring.
	groupWindow    = 32
	maxGroupWindow = 512
	growGroupsUpTo = 4096
	// maxGroupStates bounds the groups a queue keeps state for; the
	// groups past it wait in the database until the ring has room.
	maxGroupStates = 65536
	// discoverBatch is how many groups one walk of the index reads.
	discoverBatch = 1000
)

// flowState is the flow-control state of one queue.
type flowState struct {
	// rate holds the starts under the queue's rate.
	rate job.StartLog
	// groups are the groups with a window in the ring or a rate log.
	groups map[string]*groupState
	// ring holds the groups whose windows may hold available jobs, in
	// turn order; next is the next turn. Groups that ran out leave it
	// when their turn comes.
	ring []*groupState
	next int
	// known is set while every group with available jobs is in the ring:
	// a new group's window then starts complete. Until then (after a
	// start, a bulk change, or past maxGroupStates) claims walk the index
	// for groups the ring lacks, from the name after walkedTo.
	known    bool
	walkedTo string
	walking  bool
	// now is the time of the latest claim, by which idle rate logs are
	// told; sweepAt is the number of group states at which the next sweep
	// drops the idle ones.
	now     time.Time
	sweepAt int
	// cache is the budget of the groups' windows.
	cache *bodyCache
}

// groupState is what the writer keeps of one group.
type groupState struct {
	name string
	// win is the group's next available jobs in claim order, nil while
	// the group is out of the ring.
	win  *window
	rate job.StartLog
}

// forget drops every window: after a bulk change the database tells
// again which groups have jobs.
func (f *flowState) forget() {
	for g, gs := range f.groups {
		if gs.win != nil {
			gs.win.dropAll()
			gs.win = nil
		}
		if len(gs.rate) == 0 {
			delete(f.groups, g)
		}
	}
	f.ring, f.next = f.ring[:0], 0
	f.known, f.walking = false, false
}

// keepRates takes the rate logs of old, the state of the same queue
// before a resync; r is the queue's group rate.
func (f *flowState) keepRates(old *flowState, r job.Rate) {
	f.rate, f.now = old.rate, old.now
	for g, gs := range old.groups {
		if len(gs.rate) > 0 {
			if kept := f.state(g, r); kept != nil {
				kept.rate = gs.rate
			}
		}
	}
}

// sweep drops the states of the groups out of the ring whose rate logs no
// longer count under r.
func (f *flowState) sweep(r job.Rate) {
	for g, gs := range f.groups {
		if gs.win == nil && gs.rate.Idle(r, f.now) {
			delete(f.groups, g)
		}
	}
	f.sweepAt = 2*len(f.groups) + 1024
}

// state returns the state of group g, making it; nil when the queue holds
// as many group states as it may, even after dropping the idle ones
// (under the group rate r).
func (f *flowState) state(g string, r job.Rate) *groupState {
	gs := f.groups[g]
	if gs == nil {
		if len(f.groups) >= f.sweepAt {
			f.sweep(r)
		}
		if len(f.groups) >= maxGroupStates {
			return nil
		}
		if f.groups == nil {
			f.groups = make(map[string]*groupState)
		}
		gs = &groupState{name: g}
		f.groups[g] = gs
	}
	return gs
}

// join puts group g in the ring with a window, complete when complete:
// the group has no available job outside it; r is the group rate. It
// returns nil, and the ring is no longer known whole, when the queue
// holds as many group states as it may.
func (f *flowState) join(g string, complete bool, r job.Rate) *groupState {
	gs := f.state(g, r)
	if gs == nil {
		f.known = false
		return nil
	}
	if gs.win == nil {
		gs.win = newWindow(groupWindow, complete, f.cache)
		f.ring = append(f.ring, gs)
	}
	return gs
}

// available records that job e of group g became available; r is the
// group rate.
func (f *flowState) available(g string, e entry, r job.Rate) {
	gs := f.groups[g]
	if gs == nil || gs.win == nil {
		if gs = f.join(g, f.known, r); gs == nil {
			return // the database holds it; a walk will find the group
		}
	}
	gs.win.add(e)
}

// remove drops job e of group g from the group's window, if it holds it.
func (f *flowState) remove(g string, e entry) {
	if gs := f.groups[g]; gs != nil && gs.win != nil {
		gs.win.remove(e)
	}
}

// groupOf returns the state of group g with its window, or nil when the
// group has no available job for sure: it is not in the ring, which is
// known to hold every group with some; r is the group rate. A group the
// ring may lack joins it with a window that a claim fills from the
// database. When the queue holds as many group states as it may, it drops
// the window of another group that no rate holds, which a walk of the
// index finds again; full reports that every state is held by a rate, and
// the state is nil then too.
func (f *flowState) groupOf(g string, r job.Rate) (gs *groupState, full bool) {
	if gs := f.groups[g]; gs != nil && gs.win != nil {
		return gs, false
	}
	if f.known {
		return nil, false
	}
	if gs := f.join(g, false, r); gs != nil {
		return gs, false
	}
	if !f.evict(r) {
		return nil, true
	}
	if gs := f.join(g, false, r); gs != nil {
		return gs, false
	}
	return nil, true
}

// evict drops from the ring, and forgets, one group whose state no rate
// log that counts under r holds, to make room for another; its jobs stay
// in the database, where a walk finds the group again. It reports whether
// it found one.
func (f *flowState) evict(r job.Rate) bool {
	for i, gs := range f.ring {
		if !gs.rate.Idle(r, f.now) {
			continue
		}
		gs.win.dropAll()
		gs.win = nil
		delete(f.groups, gs.name)
		f.ring = slices.Delete(f.ring, i, i+1)
		if i < f.next {
			f.next--
		}
		f.known = false
		return true
	}
	return false
}

// compact drops from the ring the groups whose windows ran out of jobs
// for good, and their states unless a rate log that counts under r holds
// them.
func (f *flowState) compact(r job.Rate) {
	kept := f.ring[:0]
	for _, gs := range f.ring {
		if gs.win.len() > 0 || !gs.win.complete {
			kept = append(kept, gs)
			continue
		}
		gs.win = nil
		if gs.rate.Idle(r, f.now) {
			delete(f.groups, gs.name)
		}
	}
	clear(f.ring[len(kept):])
	f.ring = kept
}

// found puts in the ring the groups of names, which a walk of the index
// found with available jobs, and returns how many it added; r is the
// group rate. After a walk that reached the last group with every group
// found in the ring, new groups join the ring as they get jobs (known).
func (f *flowState) found(names []string, r job.Rate) int {
	added, full := 0, false
	for _, g := range names {
		if gs := f.groups[g]; gs != nil && gs.win != nil {
			continue
		}
		if f.join(g, false, r) == nil {
			full = true
			break
		}
		added++
	}
	switch {
	case len(names) == discoverBatch && !full:
		f.walkedTo, f.walking = names[len(names)-1], true
	case full:
		f.walking = false // start over once the ring has room
	default:
		f.walking, f.known = false, true
	}
	return added
}

// turnAfter makes the turn after group cursor the ring's next, when the
// cursor is in the ring at ringIndex; it compacts the ring (under the
// group rate r) when a claim went round it, or the next turn is past its
// end.
func (f *flowState) turnAfter(ringIndex int, moved, wentRound bool, r job.Rate) {
	if moved {
		f.next = ringIndex + 1
	}
	if !wentRound && f.next < len(f.ring) {
		return
	}
	var cursor *groupState
	if f.next > 0 && f.next <= len(f.ring) {
		cursor = f.ring[f.next-1]
	}
	f.compact(r)
	f.next = 0
	if i := slices.Index(f.ring, cursor); cursor != nil && i >= 0 {
		f.next = i + 1
	}
	if f.next >= len(f.ring) {
		f.next = 0
	}
}

// encodeStarts is the stored form of a rate log: 8 bytes a start, little
// endian.
func encodeStarts(log job.StartLog) []byte {
	b := make([]byte, 0, 8*len(log))
	for _, t := range log {
		b = binary.LittleEndian.AppendUint64(b, uint64(t))
	}
	return b
}

// decodeStarts reads the stored form of a rate log.
func decodeStarts(b []byte) job.StartLog {
	log := make(job.StartLog, 0, len(b)/8)
	for ; len(b) >= 8; b = b[8:] {
		log = append(log, int64(binary.LittleEndian.Uint64(b)))
	}
	return log
}
