package main

import (
	"testing"

	"github.com/whimbrel/whimbrel/internal/testbin"
)

// TestLinksNeitherLambdaNorStreamsNorProcessor: the wrapper links the
// stores, the process supervisor and the heartbeat, and for --api simple
// the Simple Lambda API's reporter and inbox, but not the Lambda runtime,
// the DynamoDB Streams client, the processor that reads the streams, or a
// metrics library (its memory is a budget, and it lives too briefly to be
// scraped).
// (The SDK's attribute-value codec, which the DynamoDB store's expression
// builder uses, links the Streams service's data types, not its client.)
func TestLinksNeitherLambdaNorStreamsNorProcessor(t *testing.T) {
	testbin.CheckDeps(t, ".",
		"github.com/aws/aws-lambda-go/",
		"github.com/aws/aws-sdk-go-v2/service/dynamodbstreams",
		"github.com/whimbrel/whimbrel/simpleapi",
		"github.com/whimbrel/whimbrel/simpleapi/lambda",
		"github.com/whimbrel/whimbrel/simpleapi/poller",
		"github.com/whimbrel/whimbrel/simpleapi/stream",
		"github.com/whimbrel/whimbrel/metrics",
		"github.com/prometheus/",
	)
}
