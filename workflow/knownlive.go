package workflow

import "context"

// knownLiveKey is the context key of WithKnownLive.
type knownLiveKey struct{}

// WithKnownLive returns ctx with live, which an advance's settle asks
// first: true means the caller knows the workflow to have an activity
// that is not terminal and whose own advance, or a settle made for it,
// follows once it is (an activity a launcher supervises in its own
// process). The settle then neither probes nor lists the workflow's
// activities: it is not done, and the one that will be done later looks
// again.
func WithKnownLive(ctx context.Context, live func(workflowExecID string) bool) context.Context {
	return context.WithValue(ctx, knownLiveKey{}, live)
}

// knownLive reports whether ctx's caller knows the workflow id to be live.
func knownLive(ctx context.Context, id string) bool {
	live, _ := ctx.Value(knownLiveKey{}).(func(string) bool)
	return live != nil && live(id)
}
