package simpleapi

import (
	"context"
	"errors"

	"github.com/aws/aws-lambda-go/events"
	ddbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// HandleLambda processes a batch of DynamoDB stream records delivered to a
// Lambda function. Records are applied in order. A malformed record is
// reported (in the log, and on its item) and skipped. At the first record
// that fails for a passing reason, it stops and reports that record as the
// batch item failure: Lambda then retries from it, having checkpointed the
// records before it, and the records after it come again with the retry.
// The event source mapping must therefore set FunctionResponseTypes to
// ReportBatchItemFailures (examples/lambda shows one).
func (p *Processor) HandleLambda(ctx context.Context, ev events.DynamoDBEvent) (events.DynamoDBEventResponse, error) {
	var resp events.DynamoDBEventResponse
	for _, r := range ev.Records {
		rec := RecordFromLambda(r)
		err := p.Process(ctx, rec)
		var bad *MalformedError
		switch {
		case err == nil, errors.As(err, &bad):
			continue
		}
		if IsTooEarly(err) {
			p.log.Info("retrying from an event that waits for an earlier one", "record", rec.ID, "error", err)
		} else {
			p.log.Error("record failed; Lambda retries from it", "record", rec.ID, "error", err)
		}
		resp.BatchItemFailures = []events.DynamoDBBatchItemFailure{{ItemIdentifier: r.Change.SequenceNumber}}
		return resp, nil
	}
	return resp, nil
}

// RecordFromLambda converts a record of a Lambda DynamoDB event.
func RecordFromLambda(r events.DynamoDBEventRecord) Record {
	return Record{ID: r.EventID, EventName: r.EventName, Keys: lambdaItem(r.Change.Keys), NewImage: lambdaItem(r.Change.NewImage)}
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
