package dynamodb

import (
	"fmt"
	"net"
	"time"

	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/smithy-go/logging"
	"github.com/hashicorp/go-hclog"
)

// httpClient is the SDK's HTTP client with each attempt, connecting
// included, bounded by attempt, and its connections pooled for many
// concurrent calls (transport.go).
func httpClient(attempt time.Duration) *awshttp.BuildableClient {
	return awshttp.NewBuildableClient().WithTimeout(attempt).
		WithDialerOptions(func(d *net.Dialer) { d.Timeout = attempt }).
		WithTransportOptions(tuneTransport)
}

// sdkLogger routes the SDK's own log lines to log at debug level: they are
// about transport details, and belong in our log, never on the wrapped
// command's stderr.
func sdkLogger(log hclog.Logger) logging.Logger {
	if log == nil {
		log = hclog.NewNullLogger()
	}
	sdkLog := log.Named("aws")
	return logging.LoggerFunc(func(c logging.Classification, format string, v ...interface{}) {
		sdkLog.Debug(fmt.Sprintf(format, v...), "classification", string(c))
	})
}
