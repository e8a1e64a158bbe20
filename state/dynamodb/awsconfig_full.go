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
