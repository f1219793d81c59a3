package client

import "context"

// traceParentKey holds a W3C traceparent in a context.
type traceParentKey struct{}

// WithTraceParent returns a copy of ctx that carries tp, a W3C
// traceparent ("00-<32 hex>-<16 hex>-<2 hex>", see EnqueueParams.TraceParent):
// Enqueue, EnqueueBatch, Transact and Batcher.Enqueue give it to each job
// enqueued with ctx that names none of its own, so that the jobs continue
// the caller's trace. An empty tp clears what ctx carried. The client does
// not check tp; the server refuses one that is not a traceparent.
//
// With OpenTelemetry, tp is the traceparent its propagator writes for the
// current span (propagation.TraceContext's Inject into a carrier, then the
// carrier's "traceparent"); the client itself depends on no tracing
// library.
func WithTraceParent(ctx context.Context, tp string) context.Context {
	return context.WithValue(ctx, traceParentKey{}, tp)
}

// TraceParentFrom returns the W3C traceparent ctx carries, or "" for none.
// A Worker's handler gets its job's traceparent this way (the handler's
// context carries the job's TraceParent, or none when the job has none),
// so that the jobs the handler enqueues with its context continue the
// job's trace, and so that the handler can start its own span as a child
// of it.
func TraceParentFrom(ctx context.Context) string {
	if ctx == nil {
		return ""
	}
	tp, _ := ctx.Value(traceParentKey{}).(string)
	return tp
}
