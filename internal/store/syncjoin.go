package store

import "context"

// syncJoinKey is the context key of WithSyncJoin.
type syncJoinKey struct{}

// WithSyncJoin returns a copy of ctx carrying join. A store that makes a
// write durable with an fsync of its own, run on the goroutine of the
// call that committed it, calls join (at most once a call) after that
// commit and before the fsync begins: whatever join writes through the
// store meanwhile commits before the fsync and so shares it. join must not
// wait for anything but the store: the callers whose commits the fsync
// covers wait for it too.
func WithSyncJoin(ctx context.Context, join func()) context.Context {
	return context.WithValue(ctx, syncJoinKey{}, join)
}

// SyncJoin returns the function WithSyncJoin put in ctx, or nil.
func SyncJoin(ctx context.Context) func() {
	join, _ := ctx.Value(syncJoinKey{}).(func())
	return join
}
