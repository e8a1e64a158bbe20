package up

import (
	"context"
	"errors"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/hashicorp/go-hclog"

	"github.com/whimbrel/whimbrel/simpleapi"
	"github.com/whimbrel/whimbrel/simpleapi/sqliteinbox"
	"github.com/whimbrel/whimbrel/simpleapi/stream"
)

// Requests is the Simple Lambda API on the embedded store: its inbox, and
// the requests marked pending in it (see simpleapi/sqliteinbox).
type Requests interface {
	simpleapi.Store
	PendingRequests(ctx context.Context, n int) ([]sqliteinbox.PendingRequest, error)
	RequestImage(ctx context.Context, p sqliteinbox.PendingRequest) (map[string]types.AttributeValue, error)
	RequestDone(ctx context.Context, p sqliteinbox.PendingRequest) error
}

const (
	// requestInterval is how often the pending requests are looked at:
	// a request starts within this of being written.
	requestInterval = time.Second
	// requestBatch is how many pending requests one pass takes.
	requestBatch = 100
)

// ServeRequests hands the pending requests to p every requestInterval
// until ctx ends, as the poller hands it a stream's records. A request's
// mark is cleared once the processor is done with it (started, rejected,
// or malformed); one it must retry keeps its mark and is tried again on
// the next pass. The processor's conditional writes make a request handed
// over twice (after a crash between its processing and the clearing of
// its mark) start one execution.
func ServeRequests(ctx context.Context, rq Requests, p *simpleapi.Processor, log hclog.Logger) {
	t := time.NewTicker(requestInterval)
	defer t.Stop()
	for {
		PassRequests(ctx, rq, p, log)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// PassRequests makes one pass over the pending requests and reports how
// many it finished with.
func PassRequests(ctx context.Context, rq Requests, p *simpleapi.Processor, log hclog.Logger) int {
	pending, err := rq.PendingRequests(ctx, requestBatch)
	if err != nil {
		log.Warn("listing the pending requests failed; trying again", "error", err)
		return 0
	}
	done := 0
	for _, pr := range pending {
		if ctx.Err() != nil {
			return done
		}
		image, err := rq.RequestImage(ctx, pr)
		if err != nil {
			log.Warn("reading a pending request failed; trying again", "workflow_request_id", pr.ID, "error", err)
			continue
		}
		if image != nil {
			keys := map[string]types.AttributeValue{"workflow_request_id": image["workflow_request_id"], "workflow_name": image["workflow_name"]}
			err = stream.Process(ctx, p, stream.Record{ID: "pending " + pr.ID, EventName: "INSERT", Keys: keys, NewImage: image})
			var me *simpleapi.MalformedError
			if err != nil && !errors.As(err, &me) {
				log.Debug("a request is not done yet; trying again", "workflow_request_id", pr.ID, "error", err)
				continue
			}
		}
		if err := rq.RequestDone(ctx, pr); err != nil {
			log.Warn("clearing a request's pending mark failed; it is handed over again", "workflow_request_id", pr.ID, "error", err)
			continue
		}
		done++
	}
	return done
}
