//go:build !whimbrel_leanaws

package dynamodb

import (
	"context"
	"fmt"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/hashicorp/go-hclog"
)

// ConfigChain names where this build finds its AWS configuration, for
// --version: empty here, where it is the SDK's default chain, which every
// AWS tool shares.
const ConfigChain = ""

// reachHelp says what the configuration needs to reach DynamoDB.
const reachHelp = "to reach DynamoDB, set AWS_REGION, credentials (AWS_PROFILE, or AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY; any values for DynamoDB Local) and, for DynamoDB Local, AWS_ENDPOINT_URL_DYNAMODB; `whimbrel run` needs none of this: it keeps its state in a local file"

// LoadConfig loads the SDK's configuration from its default chain, with
// the SDK's own log lines routed to log at debug level.
func LoadConfig(ctx context.Context, log hclog.Logger) (aws.Config, error) {
	return loadConfig(ctx, log, DefaultAttemptTimeout)
}

// loadConfig is LoadConfig with each HTTP attempt (connecting included)
// bounded by attempt.
func loadConfig(ctx context.Context, log hclog.Logger, attempt time.Duration) (aws.Config, error) {
	cfg, err := config.LoadDefaultConfig(ctx, config.WithHTTPClient(httpClient(attempt)), config.WithLogger(sdkLogger(log)))
	if err != nil {
		return aws.Config{}, fmt.Errorf("load AWS configuration: %w", err)
	}
	return cfg, nil
}
