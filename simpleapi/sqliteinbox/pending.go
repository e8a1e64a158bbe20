package sqliteinbox

import (
	"context"
	"fmt"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/whimbrel/whimbrel/state/dynamodb"
)

// PendingRequest names a request marked pending: written, and not yet
// handed to a processor that finished with it.
type PendingRequest struct {
	ID           string // workflow_request_id
	WorkflowName string
}

// PendingRequests lists up to n requests marked pending, oldest first.
// PutRequest marks each request it writes in the same transaction; a
// request written by other means (a raw insert) is not marked.
func (st *Inbox) PendingRequests(ctx context.Context, n int) ([]PendingRequest, error) {
	keys, err := st.st.Marked(ctx, "workflow_request", n)
	if err != nil {
		return nil, err
	}
	out := make([]PendingRequest, 0, len(keys))
	for _, k := range keys {
		if len(k) != 2 {
			return nil, fmt.Errorf("list the pending requests: the mark %q names no request", k)
		}
		out = append(out, PendingRequest{ID: k[0], WorkflowName: k[1]})
	}
	return out, nil
}

// RequestImage returns the request's item as a DynamoDB stream record's
// new image carries it, for the processor; nil if it is gone.
func (st *Inbox) RequestImage(ctx context.Context, p PendingRequest) (map[string]types.AttributeValue, error) {
	it, err := st.st.Get(ctx, "workflow_request", p.ID, p.WorkflowName)
	if err != nil {
		return nil, fmt.Errorf("read request %s: %w", p.ID, err)
	}
	if it == nil {
		return nil, nil
	}
	return dynamodb.ToAV(it), nil
}

// RequestDone clears the request's pending mark: the processor finished
// with it.
func (st *Inbox) RequestDone(ctx context.Context, p PendingRequest) error {
	return st.st.Unmark(ctx, "workflow_request", p.ID, p.WorkflowName)
}
