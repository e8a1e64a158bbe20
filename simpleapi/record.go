package simpleapi

import (
	"context"
	"errors"
	"fmt"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/whimbrel/whimbrel/simpleapi/dynamoinbox"
	"github.com/whimbrel/whimbrel/state"
)

// Process applies one record. It returns nil when the record is done (or
// is none of this processor's business), a *MalformedError when it must be
// skipped, and any other error when it should be retried: the store could
// not be reached, or (IsTooEarly) what it waits for may still come.
func (p *Processor) Process(ctx context.Context, r Record) error {
	switch {
	case r.EventName == "MODIFY" && !has(r.NewImage, "outcome") && !has(r.NewImage, "expires_at"):
		// A client wrote a decided item again, wiping its outcome: it is
		// decided again (see event and request for how).
	case r.EventName != "INSERT":
		return nil // outcomes recorded on items, and expiries
	}
	if len(r.NewImage) == 0 {
		// Not the item's fault: the stream is misconfigured. Skipping
		// would lose it; fail loudly until the stream is fixed.
		p.log.Error("a stream record carries no new image: the stream must be of new images (run whimbrel install)", "record", r.ID)
		return fmt.Errorf("stream record %s carries no new image: the stream must be of new images (NEW_IMAGE); run whimbrel install", r.ID)
	}
	switch {
	case has(r.Keys, "activity_event_id") || has(r.NewImage, "activity_event_id"):
		ev, err := dynamoinbox.DecodeEventImage(r.NewImage)
		if err != nil {
			p.recordMalformedEvent(ctx, r, err)
			return &MalformedError{Record: r.ID, Err: err}
		}
		return p.event(ctx, ev, r)
	case has(r.Keys, "workflow_request_id") || has(r.NewImage, "workflow_request_id"):
		req, err := dynamoinbox.DecodeRequestImage(r.NewImage)
		if err != nil {
			p.recordMalformedRequest(ctx, r, err)
			return &MalformedError{Record: r.ID, Err: err}
		}
		return p.request(ctx, req)
	}
	return &MalformedError{Record: r.ID, Err: errors.New("it is neither a workflow_request nor an activity_event item")}
}

func has(m map[string]types.AttributeValue, k string) bool {
	_, ok := m[k]
	return ok
}

func str(m map[string]types.AttributeValue, k string) string {
	if v, ok := m[k].(*types.AttributeValueMemberS); ok {
		return v.Value
	}
	return ""
}

func (p *Processor) recordMalformedEvent(ctx context.Context, r Record, cause error) {
	id, act := str(r.Keys, "activity_event_id"), str(r.Keys, "activity_exec_id")
	p.log.Error("malformed event; skipping it", "record", r.ID, "activity_event_id", id, "error", cause)
	if id == "" || act == "" {
		return
	}
	err := p.st.RecordEvent(ctx, id, act, state.Rejected("%v", cause))
	if err != nil && !errors.Is(err, state.ErrConflict) {
		p.log.Warn("recording why an event was skipped failed", "activity_event_id", id, "error", err)
	}
}

func (p *Processor) recordMalformedRequest(ctx context.Context, r Record, cause error) {
	id, name := str(r.Keys, "workflow_request_id"), str(r.Keys, "workflow_name")
	p.log.Error("malformed request; skipping it", "record", r.ID, "workflow_request_id", id, "error", cause)
	if id == "" || name == "" {
		return
	}
	err := p.st.RecordRequest(ctx, id, name, "", state.Rejected("%v", cause))
	if err != nil && !errors.Is(err, state.ErrConflict) {
		p.log.Warn("recording why a request was skipped failed", "workflow_request_id", id, "error", err)
	}
}
