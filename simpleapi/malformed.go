package simpleapi

import (
	"context"
	"errors"

	"github.com/whimbrel/whimbrel/state"
)

// RejectMalformedEvent reports a record whose activity_event item cannot
// be read, and records why on the item when its key could be read
// (eventID and activityExecID; either may be empty). It returns the
// *MalformedError to report for the record, so that the record is skipped
// and does not block the records behind it.
func (p *Processor) RejectMalformedEvent(ctx context.Context, record, eventID, activityExecID string, cause error) error {
	p.log.Error("malformed event; skipping it", "record", record, "activity_event_id", eventID, "error", cause)
	if eventID != "" && activityExecID != "" {
		err := p.st.RecordEvent(ctx, eventID, activityExecID, state.Rejected("%v", cause))
		if err != nil && !errors.Is(err, state.ErrConflict) {
			p.log.Warn("recording why an event was skipped failed", "activity_event_id", eventID, "error", err)
		}
	}
	return &MalformedError{Record: record, Err: cause}
}

// RejectMalformedRequest is RejectMalformedEvent for a workflow_request
// item, keyed by requestID and workflowName.
func (p *Processor) RejectMalformedRequest(ctx context.Context, record, requestID, workflowName string, cause error) error {
	p.log.Error("malformed request; skipping it", "record", record, "workflow_request_id", requestID, "error", cause)
	if requestID != "" && workflowName != "" {
		err := p.st.RecordRequest(ctx, requestID, workflowName, "", state.Rejected("%v", cause))
		if err != nil && !errors.Is(err, state.ErrConflict) {
			p.log.Warn("recording why a request was skipped failed", "workflow_request_id", requestID, "error", err)
		}
	}
	return &MalformedError{Record: record, Err: cause}
}
