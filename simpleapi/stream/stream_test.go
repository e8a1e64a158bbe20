package stream_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/whimbrel/whimbrel/simpleapi"
	"github.com/whimbrel/whimbrel/simpleapi/stream"
)

// TestRecordsThatNeedNoStore checks the records Process settles without
// reading the store: removals and recorded outcomes are none of its
// business, a record without a new image is an error to retry (the stream
// is misconfigured), and an item of neither table is malformed.
func TestRecordsThatNeedNoStore(t *testing.T) {
	p := simpleapi.New(simpleapi.Config{Name: "test"})
	ctx := context.Background()
	s := func(v string) types.AttributeValue { return &types.AttributeValueMemberS{Value: v} }
	key := map[string]types.AttributeValue{"workflow_request_id": s("<script>"), "workflow_name": s("wf")}

	if err := stream.Process(ctx, p, stream.Record{ID: "r1", EventName: "REMOVE", Keys: key}); err != nil {
		t.Errorf("REMOVE: %v, want nil", err)
	}
	decided := map[string]types.AttributeValue{"workflow_request_id": s("x"), "outcome": s("started")}
	if err := stream.Process(ctx, p, stream.Record{ID: "r2", EventName: "MODIFY", Keys: key, NewImage: decided}); err != nil {
		t.Errorf("MODIFY recording an outcome: %v, want nil", err)
	}
	err := stream.Process(ctx, p, stream.Record{ID: "r3", EventName: "INSERT", Keys: key})
	var bad *simpleapi.MalformedError
	if err == nil || errors.As(err, &bad) || !strings.Contains(err.Error(), "NEW_IMAGE") {
		t.Errorf("INSERT without a new image: %v, want an error naming NEW_IMAGE that is not a MalformedError", err)
	}
	other := map[string]types.AttributeValue{"id": s("x")}
	err = stream.Processor{P: p}.Process(ctx, stream.Record{ID: "r4", EventName: "INSERT", Keys: other, NewImage: other})
	if !errors.As(err, &bad) || bad.Record != "r4" {
		t.Errorf("an item of neither table: %v, want a MalformedError for r4", err)
	}
}
