// Command whimbrel-poller is the Simple Lambda API's processor without
// Lambda: it reads the streams of workflow_request and activity_event and
// applies each record. See package simpleapi.
package main

import (
	"context"
	"os/signal"
	"syscall"
	"time"

	"github.com/alecthomas/kong"

	"github.com/whimbrel/whimbrel/cmd/internal/cli"
	"github.com/whimbrel/whimbrel/metrics"
	"github.com/whimbrel/whimbrel/simpleapi"
	"github.com/whimbrel/whimbrel/simpleapi/poller"
	"github.com/whimbrel/whimbrel/simpleapi/stream"
	"github.com/whimbrel/whimbrel/state/dynamodb"
)

const description = `Process the Simple Lambda API's items without Lambda: read the DynamoDB
streams of workflow_request and activity_event, and for each inserted item
  a workflow_request (not manual)  → start the registered workflow it names, once
  an activity_event                → apply its transition if the contract allows it,
                                     in the state machine's order (RUNNING before
                                     COMPLETED, whatever their ids or when); record why
                                     not otherwise; advance the workflow
The outcome is recorded on the item (outcome, outcome_reason). Where it is in
each shard is kept in the stream_position table, so a restart resumes there;
the first start reads everything the streams still hold (24 hours). A
malformed item is reported and skipped. Any number may run (each applies
every record once, safely), but one is enough.

Needs the dynamodb store with its streams enabled (whimbrel install). The
streams endpoint is AWS_ENDPOINT_URL_DYNAMODB_STREAMS, else
AWS_ENDPOINT_URL_DYNAMODB (DynamoDB Local serves both).

Examples:
  whimbrel-poller
  whimbrel-poller --name etl-processor     handle the workflows registered with --lambda etl-processor`

// CLI is the whole grammar of whimbrel-poller.
type CLI struct {
	cli.LogFlags
	cli.StoreFlags
	metrics.Flag
	Version kong.VersionFlag `name:"version" help:"Print the version and exit."`

	Name         string        `name:"name" env:"WHIMBREL_PROCESSOR_NAME" default:"whimbrel-poller" help:"This processor's name: workflows registered with --lambda NAME are handled only by it; those registered without, by any processor."`
	OrderWindow  time.Duration `name:"order-window" env:"WHIMBREL_ORDER_WINDOW" default:"5s" help:"An event that its activity's state does not allow yet, but an event before it in the state machine's order would, is retried for this long (from when the processor first sees it) before it is rejected, without holding up other records. 0: reject at once."`
	MaxSkew      time.Duration `name:"max-skew" env:"WHIMBREL_MAX_SKEW" default:"1m" help:"An event whose when is further ahead of this processor's clock is rejected."`
	MaxAge       time.Duration `name:"max-age" env:"WHIMBREL_MAX_AGE" default:"1h" help:"An event whose when lies further before the time its item was written is rejected."`
	PollInterval time.Duration `name:"poll-interval" default:"250ms" help:"Pause after a read of a shard that found nothing."`
	Discovery    time.Duration `name:"discovery" default:"10s" help:"How often the streams' shards are listed again."`
}

func main() {
	var c CLI
	cli.Main(cli.Program{Name: "whimbrel-poller", Description: description}, &c)
}

// Run polls until stopped.
func (c *CLI) Run(k *kong.Context) error {
	if c.OrderWindow < 0 || c.PollInterval <= 0 || c.Discovery <= 0 || c.MaxSkew <= 0 || c.MaxAge <= 0 {
		return &cli.UsageError{Msg: "--poll-interval, --discovery, --max-skew and --max-age must be positive, --order-window not negative"}
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	log := c.Logger("whimbrel-poller", k.Stderr)
	ms, err := c.Flag.Start(log, &c.Hooks) // the store's calls; the poller's own are not counted
	if err != nil {
		return err
	}
	defer ms.Stop()
	opened, err := c.Open(ctx, log)
	if err != nil {
		return err
	}
	defer opened.Close()
	d, ok := opened.(*cli.Dynamo)
	if !ok {
		return &cli.UsageError{Msg: "whimbrel-poller reads DynamoDB streams: use --store dynamodb (an embedded store has no streams; start workflows there with whimbrel start)"}
	}
	st := d.Store
	var arns []string
	for _, base := range []string{dynamodb.TableWorkflowRequest, dynamodb.TableActivityEvent} {
		arn, err := poller.StreamARN(ctx, st, base)
		if err != nil {
			return err
		}
		arns = append(arns, arn)
	}
	streams, err := poller.OpenStreams(ctx, log)
	if err != nil {
		return err
	}
	p, err := poller.New(poller.Config{
		Name:      c.Name,
		Processor: stream.Processor{P: simpleapi.New(simpleapi.Config{Store: d, Name: c.Name, OrderWindow: c.OrderWindow, MaxSkew: c.MaxSkew, MaxAge: c.MaxAge, Logger: log})},
		Streams:   streams,
		Positions: poller.StorePositions{Store: st}, StreamARNs: arns,
		PollInterval: c.PollInterval, Discovery: c.Discovery, Logger: log,
	})
	if err != nil {
		return err
	}
	log.Info("polling", "name", c.Name, "streams", arns)
	return p.Run(ctx)
}
