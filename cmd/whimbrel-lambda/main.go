// Command whimbrel-lambda is the Simple Lambda API's processor as an AWS
// Lambda function, triggered by the DynamoDB streams of workflow_request
// and activity_event. See package simpleapi.
package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"time"

	"github.com/alecthomas/kong"
	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-lambda-go/lambda"

	"github.com/whimbrel/whimbrel/cmd/internal/cli"
	"github.com/whimbrel/whimbrel/schedule"
	"github.com/whimbrel/whimbrel/simpleapi"
	simplelambda "github.com/whimbrel/whimbrel/simpleapi/lambda"
)

const description = `The Simple Lambda API's processor as an AWS Lambda function (runtime
provided.al2023; deploy this binary as "bootstrap"). Subscribe it to the
streams of the workflow_request and activity_event tables with an event
source mapping whose FunctionResponseTypes include ReportBatchItemFailures.
For each inserted item it does what whimbrel-poller does: start the
registered workflow a request names (once), apply an event's transition
in the state machine's order, record the outcome on the item, and
advance the workflow. A malformed record is logged and skipped; a record
that fails for a passing reason is reported as the batch item failure, so
Lambda retries from it.

Its name (AWS_LAMBDA_FUNCTION_NAME) is what whimbrel register --lambda
routes by. The store is WHIMBREL_STORE (dynamodb) with WHIMBREL_TABLE_PREFIX;
WHIMBREL_ORDER_WINDOW (default 5s) is how long an event that its activity's
state does not allow yet is retried before it is rejected (within the
invocation first, the records behind it going on); WHIMBREL_MAX_SKEW
(default 1m) how far ahead of the function's clock an event's when may be,
WHIMBREL_MAX_AGE (default 1h) how far before the item was written.

An EventBridge scheduled event (the rule in examples/lambda/processor.yaml,
every minute) makes it fire the due schedules once, as whimbrel schedule tick.

Outside Lambda it only answers --help and --version: run whimbrel-poller
there.`

// CLI is the whole grammar of whimbrel-lambda: the environment, as Lambda
// passes no arguments.
type CLI struct {
	cli.LogFlags
	cli.StoreFlags
	Version kong.VersionFlag `name:"version" help:"Print the version and exit."`

	OrderWindow time.Duration `name:"order-window" env:"WHIMBREL_ORDER_WINDOW" default:"5s" help:"See above."`
	MaxSkew     time.Duration `name:"max-skew" env:"WHIMBREL_MAX_SKEW" default:"1m" help:"See above."`
	MaxAge      time.Duration `name:"max-age" env:"WHIMBREL_MAX_AGE" default:"1h" help:"See above."`
}

func main() {
	var c CLI
	cli.Main(cli.Program{Name: "whimbrel-lambda", Description: description}, &c)
}

// Run serves Lambda invocations.
func (c *CLI) Run(k *kong.Context) error {
	if c.OrderWindow < 0 || c.MaxSkew <= 0 || c.MaxAge <= 0 {
		return &cli.UsageError{Msg: "WHIMBREL_ORDER_WINDOW must not be negative, WHIMBREL_MAX_SKEW and WHIMBREL_MAX_AGE must be positive"}
	}
	if os.Getenv("AWS_LAMBDA_RUNTIME_API") == "" {
		return &cli.UsageError{Msg: "whimbrel-lambda runs inside AWS Lambda (AWS_LAMBDA_RUNTIME_API is not set); to process the streams elsewhere, run whimbrel-poller"}
	}
	ctx := context.Background()
	log := c.Logger("whimbrel-lambda", k.Stderr)
	st, err := c.Open(ctx, log)
	if err != nil {
		return err
	}
	defer st.Close()
	p := simpleapi.New(simpleapi.Config{Store: st, Name: os.Getenv("AWS_LAMBDA_FUNCTION_NAME"), OrderWindow: c.OrderWindow, MaxSkew: c.MaxSkew, MaxAge: c.MaxAge, Logger: log})
	h := simplelambda.New(p)
	var handler any = h.Handle
	if sched, ok := st.(schedule.Store); ok {
		handler = schedule.LambdaHandler(sched, log.Named("schedule"), func(ctx context.Context, raw json.RawMessage) (any, error) {
			var ev events.DynamoDBEvent
			if err := json.Unmarshal(raw, &ev); err != nil {
				return nil, fmt.Errorf("decode the stream records: %w", err)
			}
			return h.Handle(ctx, ev)
		})
	}
	lambda.StartWithOptions(handler, lambda.WithContext(ctx))
	return nil
}
