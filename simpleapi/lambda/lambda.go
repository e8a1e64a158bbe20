// Package lambda is the Simple Lambda API's Lambda function
// (whimbrel-lambda): it converts each DynamoDB stream record of a batch
// and hands it to the processor (package simpleapi) through the shared
// decoding (simpleapi/stream). It is the only package that links the
// Lambda runtime's event types.
package lambda

import (
	"context"
	"errors"
	"time"

	"github.com/aws/aws-lambda-go/events"
	ddbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/whimbrel/whimbrel/simpleapi"
	"github.com/whimbrel/whimbrel/simpleapi/stream"
)

// Handler is the function's handler: a processor's, for the Lambda
// runtime (lambda.Start(h.Handle)).
type Handler struct{ p *simpleapi.Processor }

// New returns the handler of a processor.
func New(p *simpleapi.Processor) *Handler { return &Handler{p: p} }

// Handle processes a batch of DynamoDB stream records delivered to a
// Lambda function. Records are applied in order. A malformed record is
// reported (in the log, and on its item) and skipped. A record whose event
// waits for an earlier one is set aside while the records behind it go on,
// and tried again within the invocation until it is decided or the order
// window has passed. At the first record that still fails for a passing
// reason (the store, or a wait that outlasts the invocation), it stops and
// reports that record as the batch item failure: Lambda then retries from
// it, having checkpointed the records before it, and the records after it
// come again with the retry, which is harmless. The event source mapping
// must therefore set FunctionResponseTypes to ReportBatchItemFailures
// (examples/lambda shows one).
func (h *Handler) Handle(ctx context.Context, ev events.DynamoDBEvent) (events.DynamoDBEventResponse, error) {
	p, log := h.p, h.p.Logger()
	var resp events.DynamoDBEventResponse
	var waiting []int // indexes of the records set aside
	fail := func(i int, err error) (events.DynamoDBEventResponse, error) {
		rec := ev.Records[i]
		if simpleapi.IsTooEarly(err) {
			log.Info("retrying from an event that waits for an earlier one", "record", rec.EventID, "error", err)
		} else {
			log.Error("record failed; Lambda retries from it", "record", rec.EventID, "error", err)
		}
		resp.BatchItemFailures = []events.DynamoDBBatchItemFailure{{ItemIdentifier: rec.Change.SequenceNumber}}
		return resp, nil
	}
	for i, r := range ev.Records {
		err := stream.Process(ctx, p, RecordFromLambda(r))
		var bad *simpleapi.MalformedError
		switch {
		case err == nil, errors.As(err, &bad):
			continue
		case simpleapi.IsTooEarly(err):
			waiting = append(waiting, i)
			continue
		}
		// Lambda retries from the earliest failed record.
		if len(waiting) > 0 && waiting[0] < i {
			i = waiting[0]
		}
		return fail(i, err)
	}
	delay := simpleapi.DeferFirst
	for len(waiting) > 0 {
		if dl, ok := ctx.Deadline(); ok && time.Until(dl) < 2*delay+time.Second {
			return fail(waiting[0], simpleapi.ErrTooEarly)
		}
		t := time.NewTimer(delay)
		select {
		case <-ctx.Done():
			t.Stop()
			return fail(waiting[0], ctx.Err())
		case <-t.C:
		}
		delay = min(2*delay, simpleapi.DeferMax)
		rest := waiting[:0]
		for _, i := range waiting {
			err := stream.Process(ctx, p, RecordFromLambda(ev.Records[i]))
			var bad *simpleapi.MalformedError
			switch {
			case err == nil, errors.As(err, &bad):
			case simpleapi.IsTooEarly(err):
				rest = append(rest, i)
			default:
				if len(rest) > 0 {
					i = rest[0] // an earlier record still waits
				}
				return fail(i, err)
			}
		}
		waiting = rest
	}
	return resp, nil
}

// RecordFromLambda converts a record of a Lambda DynamoDB event.
func RecordFromLambda(r events.DynamoDBEventRecord) stream.Record {
	return stream.Record{ID: r.EventID, EventName: r.EventName, Keys: lambdaItem(r.Change.Keys), NewImage: lambdaItem(r.Change.NewImage),
		Created: r.Change.ApproximateCreationDateTime.Time}
}

func lambdaItem(m map[string]events.DynamoDBAttributeValue) map[string]ddbtypes.AttributeValue {
	if m == nil {
		return nil
	}
	out := make(map[string]ddbtypes.AttributeValue, len(m))
	for k, v := range m {
		out[k] = lambdaValue(v)
	}
	return out
}

// lambdaValue converts the Lambda event's attribute value to the SDK's.
func lambdaValue(v events.DynamoDBAttributeValue) ddbtypes.AttributeValue {
	switch v.DataType() {
	case events.DataTypeString:
		return &ddbtypes.AttributeValueMemberS{Value: v.String()}
	case events.DataTypeNumber:
		return &ddbtypes.AttributeValueMemberN{Value: v.Number()}
	case events.DataTypeBoolean:
		return &ddbtypes.AttributeValueMemberBOOL{Value: v.Boolean()}
	case events.DataTypeBinary:
		return &ddbtypes.AttributeValueMemberB{Value: v.Binary()}
	case events.DataTypeStringSet:
		return &ddbtypes.AttributeValueMemberSS{Value: v.StringSet()}
	case events.DataTypeNumberSet:
		return &ddbtypes.AttributeValueMemberNS{Value: v.NumberSet()}
	case events.DataTypeBinarySet:
		return &ddbtypes.AttributeValueMemberBS{Value: v.BinarySet()}
	case events.DataTypeList:
		l := make([]ddbtypes.AttributeValue, len(v.List()))
		for i, e := range v.List() {
			l[i] = lambdaValue(e)
		}
		return &ddbtypes.AttributeValueMemberL{Value: l}
	case events.DataTypeMap:
		return &ddbtypes.AttributeValueMemberM{Value: lambdaItem(v.Map())}
	}
	return &ddbtypes.AttributeValueMemberNULL{Value: true}
}
