// Package stream decodes the DynamoDB stream records of the Simple Lambda
// API's two tables and hands the requests and events they carry to the
// processor (package simpleapi). Both ways of running the processor share
// it: simpleapi/lambda converts the records the Lambda runtime delivers,
// simpleapi/poller those it reads from DynamoDB Streams, each into a
// Record.
package stream

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/whimbrel/whimbrel/simpleapi"
	"github.com/whimbrel/whimbrel/simpleapi/dynamoinbox"
)

// Record is one DynamoDB stream record, as the poller reads it and the
// Lambda runtime delivers it.
type Record struct {
	ID        string // the stream record's eventID, for the log
	EventName string // INSERT, MODIFY or REMOVE
	Keys      map[string]types.AttributeValue
	NewImage  map[string]types.AttributeValue
	// Created is when the item was written, by DynamoDB's clock (the
	// record's ApproximateCreationDateTime); zero if unknown.
	Created time.Time
}

// Processor applies the records it is given through a *simpleapi.Processor.
// It is safe for concurrent use.
type Processor struct {
	P *simpleapi.Processor
}

// Process applies one record (see Process).
func (s Processor) Process(ctx context.Context, r Record) error { return Process(ctx, s.P, r) }

// Process decodes one record and applies the request or event it carries
// with p. It returns nil when the record is done (or is none of this
// processor's business), a *simpleapi.MalformedError when it must be
// skipped, and any other error when it should be retried: the store could
// not be reached, or (simpleapi.IsTooEarly) what it waits for may still
// come.
func Process(ctx context.Context, p *simpleapi.Processor, r Record) error {
	switch {
	case r.EventName == "MODIFY" && !has(r.NewImage, "outcome") && !has(r.NewImage, "expires_at"):
		// A client wrote a decided item again, wiping its outcome: it is
		// decided again (see ProcessEvent and ProcessRequest for how).
	case r.EventName != "INSERT":
		return nil // outcomes recorded on items, and expiries
	}
	if len(r.NewImage) == 0 {
		// Not the item's fault: the stream is misconfigured. Skipping
		// would lose it; fail loudly until the stream is fixed.
		p.Logger().Error("a stream record carries no new image: the stream must be of new images (run whimbrel install)", "record", r.ID)
		return fmt.Errorf("stream record %s carries no new image: the stream must be of new images (NEW_IMAGE); run whimbrel install", r.ID)
	}
	switch {
	case has(r.Keys, "activity_event_id") || has(r.NewImage, "activity_event_id"):
		ev, err := dynamoinbox.DecodeEventImage(r.NewImage)
		if err != nil {
			return p.RejectMalformedEvent(ctx, r.ID, str(r.Keys, "activity_event_id"), str(r.Keys, "activity_exec_id"), err)
		}
		return p.ProcessEvent(ctx, ev, simpleapi.Delivery{Created: r.Created, Rewritten: r.EventName == "MODIFY"})
	case has(r.Keys, "workflow_request_id") || has(r.NewImage, "workflow_request_id"):
		req, err := dynamoinbox.DecodeRequestImage(r.NewImage)
		if err != nil {
			return p.RejectMalformedRequest(ctx, r.ID, str(r.Keys, "workflow_request_id"), str(r.Keys, "workflow_name"), err)
		}
		return p.ProcessRequest(ctx, req)
	}
	return &simpleapi.MalformedError{Record: r.ID, Err: errors.New("it is neither a workflow_request nor an activity_event item")}
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
