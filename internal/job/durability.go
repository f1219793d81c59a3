package job

// StoredDurability is the level at which a store whose own level is own
// (full for a store on disk, memory for one in memory) keeps a job asking
// for durability d, and whether it keeps such a job at all: an empty d
// takes own; a store on disk keeps full and process jobs, one in memory
// memory jobs only.
func StoredDurability(d, own Durability) (Durability, bool) {
	switch {
	case d == "":
		return own, true
	case own == DurabilityMemory:
		return d, d == DurabilityMemory
	}
	return d, d == DurabilityFull || d == DurabilityProcess
}
