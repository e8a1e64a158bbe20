package dynamodb

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/smithy-go"
	smithyhttp "github.com/aws/smithy-go/transport/http"

	"github.com/whimbrel/whimbrel/state"
)

// Every call to DynamoDB is bounded twice: each HTTP attempt by the
// client's timeout (AttemptTimeout, set by Open), and the whole call, the
// SDK's retries inside, by CallTimeout. A black-holed endpoint then costs
// a caller CallTimeout, never a hang. The same place translates the
// failures an operator must act on into the domain's errors, naming what
// to do; no SDK type is needed above the store.

// Defaults of Options.
const (
	// DefaultAttemptTimeout bounds one HTTP attempt: DynamoDB answers in
	// milliseconds, so seconds mean the network or the endpoint is wrong.
	DefaultAttemptTimeout = 5 * time.Second
	// DefaultCallTimeout bounds one store call with the SDK's retries
	// (3 attempts) inside; a command against a silent endpoint fails in
	// this long.
	DefaultCallTimeout = 15 * time.Second
)

// bounded is the API with every call bounded and its failures translated.
type bounded struct {
	api      API
	timeout  time.Duration
	endpoint string
	prefix   string
	observe  func(Call)
}

// Call is one call to DynamoDB as Options.Observe sees it.
type Call struct {
	Op   string        // DynamoDB's name of the operation: "UpdateItem", "Query", …
	Took time.Duration // the whole call, the SDK's retries inside
	// Code is "OK" for a call that succeeded; else DynamoDB's error code
	// ("ConditionalCheckFailedException", "ThrottlingException", …), or
	// "Timeout", "Canceled" or "Unreachable" when no answer came.
	Code string
}

// Hooks are Options.Observe and Options.Capacity as one value, which a
// command that serves metrics hands to the store it opens.
type Hooks struct {
	Observe  func(Call)
	Capacity func(Capacity)
}

// call makes one bounded call; table names the table it is on (for a
// missing table's message).
func call[T any](ctx context.Context, b *bounded, op, table string, fn func(context.Context) (T, error)) (T, error) {
	cctx, cancel := context.WithTimeout(ctx, b.timeout)
	defer cancel()
	began := time.Now()
	out, err := fn(cctx)
	if b.observe != nil {
		b.observe(Call{Op: op, Took: time.Since(began), Code: codeOf(ctx, cctx, err)})
	}
	if err != nil {
		err = b.translate(ctx, cctx.Err() != nil, op, table, err)
	}
	return out, err
}

// codeOf names how a call ended, for Call.Code: a small, fixed set of
// values, since it becomes a label.
func codeOf(parent, bounded context.Context, err error) string {
	var api smithy.APIError
	var send *smithyhttp.RequestSendError
	switch {
	case err == nil:
		return "OK"
	case errors.As(err, &api) && api.ErrorCode() != "":
		return api.ErrorCode()
	case parent.Err() != nil:
		return "Canceled"
	case bounded.Err() != nil:
		return "Timeout"
	case errors.As(err, &send):
		return "Unreachable"
	}
	return "Error"
}

// What to check when DynamoDB cannot be reached, and when it does not
// answer in time.
const (
	reachHint   = "check the endpoint (AWS_ENDPOINT_URL_DYNAMODB, or the region's) and that it can be reached from here (proxy, VPC endpoint, firewall)"
	timeoutHint = reachHint + ", or raise --store-timeout (WHIMBREL_STORE_TIMEOUT)"
	attemptHint = reachHint + ", or raise --store-attempt-timeout (WHIMBREL_STORE_ATTEMPT_TIMEOUT)"
)

// translate turns the failures an operator must act on into the domain's
// errors; bounded reports whether the call's own bound passed.
func (b *bounded) translate(parent context.Context, bounded bool, op, table string, err error) error {
	var nf *types.ResourceNotFoundException
	var region *aws.MissingRegionError
	var send *smithyhttp.RequestSendError
	switch {
	case parent.Err() != nil:
		return err // the caller gave up: not the store's fault
	case errors.As(err, &nf):
		return &state.TableMissingError{Table: table, Prefix: b.prefix, Store: "dynamodb", Err: err}
	case errors.As(err, &region):
		return &state.ConfigError{Msg: "no AWS region is set for the dynamodb store: " + reachHelp, Err: err}
	case strings.Contains(err.Error(), "get identity:") || strings.Contains(err.Error(), "failed to retrieve credentials"):
		return &state.ConfigError{Msg: "no AWS credentials were found for the dynamodb store: " + reachHelp, Err: err}
	case bounded:
		return &state.UnavailableError{Store: "DynamoDB", Endpoint: b.endpoint, Op: op, Timeout: b.timeout, Hint: timeoutHint, Err: err}
	case errors.As(err, &send):
		h := reachHint
		var ne net.Error
		if errors.As(send.Err, &ne) && ne.Timeout() {
			h = attemptHint // every attempt timed out
		}
		return &state.UnavailableError{Store: "DynamoDB", Endpoint: b.endpoint, Op: op, Hint: h, Err: send.Err}
	}
	return err
}

func (b *bounded) GetItem(ctx context.Context, in *dynamodb.GetItemInput, opts ...func(*dynamodb.Options)) (*dynamodb.GetItemOutput, error) {
	return call(ctx, b, "GetItem", aws.ToString(in.TableName), func(ctx context.Context) (*dynamodb.GetItemOutput, error) {
		return b.api.GetItem(ctx, in, opts...)
	})
}

func (b *bounded) PutItem(ctx context.Context, in *dynamodb.PutItemInput, opts ...func(*dynamodb.Options)) (*dynamodb.PutItemOutput, error) {
	return call(ctx, b, "PutItem", aws.ToString(in.TableName), func(ctx context.Context) (*dynamodb.PutItemOutput, error) {
		return b.api.PutItem(ctx, in, opts...)
	})
}

func (b *bounded) UpdateItem(ctx context.Context, in *dynamodb.UpdateItemInput, opts ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error) {
	return call(ctx, b, "UpdateItem", aws.ToString(in.TableName), func(ctx context.Context) (*dynamodb.UpdateItemOutput, error) {
		return b.api.UpdateItem(ctx, in, opts...)
	})
}

func (b *bounded) Query(ctx context.Context, in *dynamodb.QueryInput, opts ...func(*dynamodb.Options)) (*dynamodb.QueryOutput, error) {
	return call(ctx, b, "Query", aws.ToString(in.TableName), func(ctx context.Context) (*dynamodb.QueryOutput, error) {
		return b.api.Query(ctx, in, opts...)
	})
}

func (b *bounded) BatchGetItem(ctx context.Context, in *dynamodb.BatchGetItemInput, opts ...func(*dynamodb.Options)) (*dynamodb.BatchGetItemOutput, error) {
	table := ""
	for name := range in.RequestItems {
		table = name
	}
	return call(ctx, b, "BatchGetItem", table, func(ctx context.Context) (*dynamodb.BatchGetItemOutput, error) {
		return b.api.BatchGetItem(ctx, in, opts...)
	})
}

func (b *bounded) Scan(ctx context.Context, in *dynamodb.ScanInput, opts ...func(*dynamodb.Options)) (*dynamodb.ScanOutput, error) {
	return call(ctx, b, "Scan", aws.ToString(in.TableName), func(ctx context.Context) (*dynamodb.ScanOutput, error) {
		return b.api.Scan(ctx, in, opts...)
	})
}

func (b *bounded) TransactWriteItems(ctx context.Context, in *dynamodb.TransactWriteItemsInput, opts ...func(*dynamodb.Options)) (*dynamodb.TransactWriteItemsOutput, error) {
	table := ""
	if len(in.TransactItems) > 0 {
		switch t := in.TransactItems[0]; {
		case t.Put != nil:
			table = aws.ToString(t.Put.TableName)
		case t.Update != nil:
			table = aws.ToString(t.Update.TableName)
		case t.ConditionCheck != nil:
			table = aws.ToString(t.ConditionCheck.TableName)
		}
	}
	return call(ctx, b, "TransactWriteItems", table, func(ctx context.Context) (*dynamodb.TransactWriteItemsOutput, error) {
		return b.api.TransactWriteItems(ctx, in, opts...)
	})
}

func (b *bounded) CreateTable(ctx context.Context, in *dynamodb.CreateTableInput, opts ...func(*dynamodb.Options)) (*dynamodb.CreateTableOutput, error) {
	return call(ctx, b, "CreateTable", aws.ToString(in.TableName), func(ctx context.Context) (*dynamodb.CreateTableOutput, error) {
		return b.api.CreateTable(ctx, in, opts...)
	})
}

func (b *bounded) DescribeTable(ctx context.Context, in *dynamodb.DescribeTableInput, opts ...func(*dynamodb.Options)) (*dynamodb.DescribeTableOutput, error) {
	return call(ctx, b, "DescribeTable", aws.ToString(in.TableName), func(ctx context.Context) (*dynamodb.DescribeTableOutput, error) {
		return b.api.DescribeTable(ctx, in, opts...)
	})
}

func (b *bounded) UpdateTable(ctx context.Context, in *dynamodb.UpdateTableInput, opts ...func(*dynamodb.Options)) (*dynamodb.UpdateTableOutput, error) {
	return call(ctx, b, "UpdateTable", aws.ToString(in.TableName), func(ctx context.Context) (*dynamodb.UpdateTableOutput, error) {
		return b.api.UpdateTable(ctx, in, opts...)
	})
}

func (b *bounded) DescribeTimeToLive(ctx context.Context, in *dynamodb.DescribeTimeToLiveInput, opts ...func(*dynamodb.Options)) (*dynamodb.DescribeTimeToLiveOutput, error) {
	return call(ctx, b, "DescribeTimeToLive", aws.ToString(in.TableName), func(ctx context.Context) (*dynamodb.DescribeTimeToLiveOutput, error) {
		return b.api.DescribeTimeToLive(ctx, in, opts...)
	})
}

func (b *bounded) UpdateTimeToLive(ctx context.Context, in *dynamodb.UpdateTimeToLiveInput, opts ...func(*dynamodb.Options)) (*dynamodb.UpdateTimeToLiveOutput, error) {
	return call(ctx, b, "UpdateTimeToLive", aws.ToString(in.TableName), func(ctx context.Context) (*dynamodb.UpdateTimeToLiveOutput, error) {
		return b.api.UpdateTimeToLive(ctx, in, opts...)
	})
}

var _ API = (*bounded)(nil)

// endpointOf names the endpoint the default chain reaches DynamoDB at,
// for messages.
func endpointOf(region string) string {
	for _, v := range []string{"AWS_ENDPOINT_URL_DYNAMODB", "AWS_ENDPOINT_URL"} {
		if ep := strings.TrimSpace(getenv(v)); ep != "" {
			return ep
		}
	}
	if region == "" {
		return "DynamoDB's endpoint"
	}
	return fmt.Sprintf("https://dynamodb.%s.amazonaws.com", region)
}
