package schedule

import (
	"context"
	"encoding/json"
	"time"

	"github.com/hashicorp/go-hclog"
)

// ScheduledEvent reports whether a Lambda payload is an EventBridge
// scheduled event (a rule's "rate(1 minute)"), which asks for a tick.
func ScheduledEvent(payload []byte) bool {
	var ev struct {
		Source     string `json:"source"`
		DetailType string `json:"detail-type"`
	}
	if json.Unmarshal(payload, &ev) != nil {
		return false
	}
	return ev.Source == "aws.events" && ev.DetailType == "Scheduled Event"
}

// LambdaHandler is a Lambda handler that ticks on a scheduled event and
// hands every other payload to next. The tick's answer is its Report; a
// failed tick fails the invocation, and the next minute's tries again.
func LambdaHandler(st Store, log hclog.Logger, next func(context.Context, json.RawMessage) (any, error)) func(context.Context, json.RawMessage) (any, error) {
	if log == nil {
		log = hclog.NewNullLogger()
	}
	return func(ctx context.Context, payload json.RawMessage) (any, error) {
		if !ScheduledEvent(payload) {
			return next(ctx, payload)
		}
		r, err := Tick(ctx, st, time.Now(), log)
		log.Info("tick done", "due", r.Due, "started", r.Started, "skipped", r.Skipped, "counted", r.Counted, "failed", r.Failed)
		return r, err
	}
}
