package job

import "time"

// Change is one field of a merge patch (RFC 7396): the zero Change
// leaves the field as it is, Set gives it a value and Clear takes it back
// to unset, its default. A Change knows nothing of what its field means;
// SettingsPatch.Merge and LimitsPatch.Merge apply them.
type Change[T any] struct {
	op    changeOp
	value T
}

// changeOp is what a Change does.
type changeOp uint8

const (
	opLeave changeOp = iota
	opSet
	opClear
)

// Set is the Change that gives a field value v.
func Set[T any](v T) Change[T] { return Change[T]{op: opSet, value: v} }

// Clear is the Change that takes a field back to unset.
func Clear[T any]() Change[T] { return Change[T]{op: opClear} }

// IsSet reports whether c gives its field a value.
func (c Change[T]) IsSet() bool { return c.op == opSet }

// IsClear reports whether c takes its field back to unset.
func (c Change[T]) IsClear() bool { return c.op == opClear }

// Leaves reports whether c leaves its field as it is.
func (c Change[T]) Leaves() bool { return c.op == opLeave }

// Value is the value c sets; the zero T unless IsSet.
func (c Change[T]) Value() T { return c.value }

// apply is cur changed by c, unset being the zero T.
func (c Change[T]) apply(cur T) T {
	switch c.op {
	case opSet:
		return c.value
	case opClear:
		var zero T
		return zero
	}
	return cur
}

// setsZero reports whether c sets its field to the zero value, which
// would mean unset: a patch clears a field with Clear (null on the wire),
// so a set zero is refused as out of range.
func setsZero[T comparable](c Change[T]) bool {
	var zero T
	return c.op == opSet && c.value == zero
}

// SettingsPatch changes some of a queue's settings and leaves the others
// as they are (PATCH /v1/queues/{name}/settings). Its zero value changes
// nothing.
type SettingsPatch struct {
	DeadLetterQueue    Change[string]
	MaxWait            Change[time.Duration]
	DefaultLease       Change[time.Duration]
	DefaultMaxAttempts Change[int]
	DefaultDelay       Change[time.Duration]
}

// Merge is the one rule of a settings patch: cur, the settings of queue,
// with every field p sets or clears changed and every other one kept,
// refused as a whole when a set value is zero (Clear unsets a field) or
// the result fails QueueSettings.Check, with an *InputError naming the
// wire field. A store calls it in the transaction that read cur and
// writes its result, so patches of different fields never lose each
// other.
func (p SettingsPatch) Merge(queue string, cur QueueSettings) (QueueSettings, error) {
	switch {
	case setsZero(p.DeadLetterQueue):
		return cur, Invalid("dead_letter_queue", "must be a queue name; send null for none")
	case setsZero(p.MaxWait):
		return cur, Invalid("max_wait_ms", "must be between %d and %d; send null for no maximum wait",
			ShortestMaxWait.Milliseconds(), LongestMaxWait.Milliseconds())
	case setsZero(p.DefaultLease):
		return cur, Invalid("default_lease_ms", "must be between %d and %d; send null for the server's default",
			MinLease.Milliseconds(), MaxLease.Milliseconds())
	case setsZero(p.DefaultMaxAttempts):
		return cur, Invalid("default_max_attempts", "must be between 1 and %d; send null for the server's default", MaxAttempts)
	case setsZero(p.DefaultDelay):
		return cur, Invalid("default_delay_ms", "must be between %d and %d; send null for no delay",
			ShortestDefaultDelay.Milliseconds(), MaxDelay.Milliseconds())
	}
	out := QueueSettings{
		DeadLetterQueue:    p.DeadLetterQueue.apply(cur.DeadLetterQueue),
		MaxWait:            p.MaxWait.apply(cur.MaxWait),
		DefaultLease:       p.DefaultLease.apply(cur.DefaultLease),
		DefaultMaxAttempts: p.DefaultMaxAttempts.apply(cur.DefaultMaxAttempts),
		DefaultDelay:       p.DefaultDelay.apply(cur.DefaultDelay),
	}
	if err := out.Check(queue); err != nil {
		return cur, err
	}
	return out, nil
}

// RatePatch changes the members of a rate: a rate that a patch sets is
// merged member by member into the queue's rate, as RFC 7396 merges a
// nested object, and must come out whole (both members set).
type RatePatch struct {
	Limit  Change[int]
	Period Change[time.Duration]
}

// LimitsPatch changes some of a queue's limits and leaves the others as
// they are (PATCH /v1/queues/{name}/limits). Its zero value changes
// nothing. Ordered set to false is the same as cleared.
type LimitsPatch struct {
	Rate           Change[RatePatch]
	MaxActive      Change[int]
	GroupRate      Change[RatePatch]
	GroupMaxActive Change[int]
	Ordered        Change[bool]
}

// Merge is the one rule of a limits patch: cur with every field p sets
// or clears changed and every other one kept, normalized (Normalized),
// refused as a whole when a set value is zero (Clear removes a limit), a
// rate comes out without one of its members, or the result fails
// Limits.Check, with an *InputError naming the wire field ("rate.limit",
// "group_max_active", …). An ordered queue shows a group cap of 1, which
// a patch that clears Ordered keeps unless it clears GroupMaxActive too.
// A store calls it in the transaction that read cur and writes its
// result, so patches of different fields never lose each other.
func (p LimitsPatch) Merge(cur Limits) (Limits, error) {
	out := cur
	var err error
	if out.Rate, err = mergeRate("rate", p.Rate, cur.Rate); err != nil {
		return cur, err
	}
	if out.GroupRate, err = mergeRate("group_rate", p.GroupRate, cur.GroupRate); err != nil {
		return cur, err
	}
	for _, m := range []struct {
		field string
		c     Change[int]
		dst   *int
	}{{"max_active", p.MaxActive, &out.MaxActive}, {"group_max_active", p.GroupMaxActive, &out.GroupMaxActive}} {
		if setsZero(m.c) {
			return cur, Invalid(m.field, "must be between 1 and %d; send null for no limit", MaxActiveLimit)
		}
		*m.dst = m.c.apply(*m.dst)
	}
	out.Ordered = p.Ordered.apply(cur.Ordered)
	if err := out.Check(); err != nil {
		return cur, err
	}
	return out.Normalized(), nil
}

// mergeRate is rate cur, the rate of the wire field field, changed by c.
func mergeRate(field string, c Change[RatePatch], cur Rate) (Rate, error) {
	rp := c.value
	switch c.op {
	case opLeave:
		return cur, nil
	case opClear:
		return Rate{}, nil
	}
	if setsZero(rp.Limit) || setsZero(rp.Period) {
		what, name := "limit", "at least 1 start a period"
		if setsZero(rp.Period) {
			what, name = "period_ms", "at least 1 ms"
		}
		return cur, Invalid(field+"."+what, "must be %s; send null in place of the rate for no limit", name)
	}
	out := Rate{Limit: rp.Limit.apply(cur.Limit), Period: rp.Period.apply(cur.Period)}
	if out.Limit == 0 {
		return cur, Invalid(field+".limit", "is required: at least 1 start a period")
	}
	if out.Period == 0 {
		return cur, Invalid(field+".period_ms", "is required: at least 1 ms")
	}
	return out, nil
}
