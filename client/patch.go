package client

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"time"
)

// Change is one field of a patch (UpdateQueueSettings, UpdateQueueLimits):
// the zero Change leaves the field as it is, SetTo gives it a value and
// Unset clears it, back to its default. On the wire a patch is a JSON
// merge patch (RFC 7396): a field left out, a value, or null.
type Change[T any] struct {
	op    changeOp
	value T
}

// changeOp is what a Change does.
type changeOp uint8

const (
	changeLeave changeOp = iota
	changeSet
	changeUnset
)

// SetTo is the Change that gives a field value v. A zero v is refused by
// the server (ErrInvalidArgument naming the field): clear a field with
// Unset.
func SetTo[T any](v T) Change[T] { return Change[T]{op: changeSet, value: v} }

// Unset is the Change that clears a field: the setting is unset, or the
// limit removed.
func Unset[T any]() Change[T] { return Change[T]{op: changeUnset} }

// IsZero reports whether c leaves its field as it is.
func (c Change[T]) IsZero() bool { return c.op == changeLeave }

// put adds c's member to the patch object m under key, its value made by
// wire: nothing when c leaves the field, null when it clears it.
func put[T any](m map[string]any, key string, c Change[T], wire func(T) any) {
	switch c.op {
	case changeSet:
		m[key] = wire(c.value)
	case changeUnset:
		m[key] = nil
	}
}

// asIs is the wire form of a value sent as it is.
func asIs[T any](v T) any { return v }

// millisOf is the wire form of a duration: whole milliseconds, a fraction
// rounded up.
func millisOf(d time.Duration) any { return msec(d) }

// QueueSettingsPatch changes some of a queue's settings (see
// QueueSettings for what each means) and leaves the others as they are;
// the zero QueueSettingsPatch changes nothing. Durations are sent in
// whole milliseconds, a fraction rounded up.
type QueueSettingsPatch struct {
	DeadLetterQueue    Change[string]
	MaxWait            Change[time.Duration]
	DefaultLease       Change[time.Duration]
	DefaultMaxAttempts Change[int]
	DefaultDelay       Change[time.Duration]
}

// MarshalJSON encodes p as the protocol's merge patch.
func (p QueueSettingsPatch) MarshalJSON() ([]byte, error) {
	m := map[string]any{}
	put(m, "dead_letter_queue", p.DeadLetterQueue, asIs)
	put(m, "max_wait_ms", p.MaxWait, millisOf)
	put(m, "default_lease_ms", p.DefaultLease, millisOf)
	put(m, "default_max_attempts", p.DefaultMaxAttempts, asIs)
	put(m, "default_delay_ms", p.DefaultDelay, millisOf)
	return json.Marshal(m)
}

// RatePatch changes the members of a queue's rate: a rate that a patch
// sets is merged member by member into the queue's rate, and must come
// out with both members. SetRate sets both.
type RatePatch struct {
	Limit  Change[int]
	Period Change[time.Duration]
}

// SetRate is the Change that gives a rate both its members, r's.
func SetRate(r Rate) Change[RatePatch] {
	return SetTo(RatePatch{Limit: SetTo(r.Limit), Period: SetTo(r.Period)})
}

// wireRatePatch is the wire form of a rate patch.
func wireRatePatch(r RatePatch) any {
	m := map[string]any{}
	put(m, "limit", r.Limit, asIs)
	put(m, "period_ms", r.Period, millisOf)
	return m
}

// LimitsPatch changes some of a queue's limits (see Limits for what each
// means) and leaves the others as they are; the zero LimitsPatch changes
// nothing. Ordered set to false is the same as unset. An ordered queue
// shows GroupMaxActive 1, which a patch that unsets Ordered keeps unless
// it unsets GroupMaxActive too.
type LimitsPatch struct {
	Rate           Change[RatePatch]
	MaxActive      Change[int]
	GroupRate      Change[RatePatch]
	GroupMaxActive Change[int]
	Ordered        Change[bool]
}

// MarshalJSON encodes p as the protocol's merge patch.
func (p LimitsPatch) MarshalJSON() ([]byte, error) {
	m := map[string]any{}
	put(m, "rate", p.Rate, wireRatePatch)
	put(m, "max_active", p.MaxActive, asIs)
	put(m, "group_rate", p.GroupRate, wireRatePatch)
	put(m, "group_max_active", p.GroupMaxActive, asIs)
	put(m, "ordered", p.Ordered, asIs)
	return json.Marshal(m)
}

// UpdateQueueSettings changes the settings that p sets or unsets and
// keeps the others (PATCH /v1/queues/{name}/settings), and returns the
// queue. The server merges p into the queue's settings and writes the
// result in one transaction, so updates of different fields made at once
// all take effect. Updating the settings of a queue that holds no jobs
// creates it. A value, or a result, the queue may not have gives
// ErrInvalidArgument whose Field names it (a zero value included: Unset
// clears a field), and changes nothing.
func (c *Client) UpdateQueueSettings(ctx context.Context, name string, p QueueSettingsPatch) (*Queue, error) {
	var q Queue
	if err := c.queueCall(ctx, http.MethodPatch, name, "/settings", p, &q); err != nil {
		return nil, fmt.Errorf("update settings of queue %s: %w", name, err)
	}
	return &q, nil
}

// UpdateQueueLimits changes the limits that p sets or unsets and keeps
// the others (PATCH /v1/queues/{name}/limits), and returns the queue, as
// UpdateQueueSettings does for settings. A rate patch that leaves the
// queue's rate without one of its members gives ErrInvalidArgument whose
// Field names it ("rate.period_ms"). Fetches parked on the queue look
// again at once.
func (c *Client) UpdateQueueLimits(ctx context.Context, name string, p LimitsPatch) (*Queue, error) {
	var q Queue
	if err := c.queueCall(ctx, http.MethodPatch, name, "/limits", p, &q); err != nil {
		return nil, fmt.Errorf("update limits of queue %s: %w", name, err)
	}
	return &q, nil
}
