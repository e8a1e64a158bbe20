package dynamodb

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/dynamodbstreams"
	"github.com/hashicorp/go-hclog"

	"github.com/whimbrel/whimbrel/state/internal/attr"
)

// What the stream poller needs of DynamoDB besides the stream records:
// where the streams are, and where it is in each shard.

// OpenStreams returns a DynamoDB Streams client from the SDK's default
// chain. Without AWS_ENDPOINT_URL_DYNAMODB_STREAMS it uses
// AWS_ENDPOINT_URL_DYNAMODB, as DynamoDB Local serves both on one endpoint.
func OpenStreams(ctx context.Context, log hclog.Logger) (*dynamodbstreams.Client, error) {
	cfg, err := LoadConfig(ctx, log)
	if err != nil {
		return nil, err
	}
	return dynamodbstreams.NewFromConfig(cfg, func(o *dynamodbstreams.Options) {
		if os.Getenv("AWS_ENDPOINT_URL_DYNAMODB_STREAMS") == "" {
			if ep := os.Getenv("AWS_ENDPOINT_URL_DYNAMODB"); ep != "" {
				o.BaseEndpoint = aws.String(ep)
			}
		}
	}), nil
}

// StreamARN returns the ARN of a table's current stream (base is the name
// without prefix), or an error saying to run install if it has none.
func (st *Store) StreamARN(ctx context.Context, base string) (string, error) {
	name := st.prefix + base
	out, err := st.api.DescribeTable(ctx, &dynamodb.DescribeTableInput{TableName: aws.String(name)})
	if err != nil {
		return "", fmt.Errorf("describe table %s: %w", name, err)
	}
	sp := out.Table.StreamSpecification
	if sp == nil || !aws.ToBool(sp.StreamEnabled) || aws.ToString(out.Table.LatestStreamArn) == "" {
		return "", fmt.Errorf("table %s has no stream: run `whimbrel install` to enable it", name)
	}
	if sp.StreamViewType != types.StreamViewTypeNewImage && sp.StreamViewType != types.StreamViewTypeNewAndOldImages {
		return "", fmt.Errorf("table %s has a stream of %s, but the processor needs new images: switch the stream off, then run `whimbrel install`", name, sp.StreamViewType)
	}
	return aws.ToString(out.Table.LatestStreamArn), nil
}

// positionTTL is how long a shard position is kept after its last write:
// a stream keeps records for 24 hours.
const positionTTL = 48 * time.Hour

// ShardPosition is where the poller is in one shard.
type ShardPosition struct {
	// Sequence is the sequence number of the last record processed; empty:
	// none yet.
	Sequence string
	// Finished: the shard is closed and every record in it processed.
	Finished bool
}

// positionKey: each poller (by name) keeps its own positions, as pollers
// of different names apply different records.
func positionKey(poller, streamARN, shardID string) item {
	return item{"poller": avS(poller), "shard": avS(streamARN + "#" + shardID)}
}

// Position reads where a poller is in a shard; the zero ShardPosition if
// it has not been there.
func (st *Store) Position(ctx context.Context, poller, streamARN, shardID string) (ShardPosition, error) {
	m, err := st.get(ctx, "Position", TableStreamPosition, positionKey(poller, streamARN, shardID))
	if err != nil {
		return ShardPosition{}, fmt.Errorf("read the position in shard %s: %w", shardID, err)
	}
	var p ShardPosition
	if v, ok := m["sequence_number"].(attr.S); ok {
		p.Sequence = string(v)
	}
	if v, ok := m["finished"].(attr.Bool); ok {
		p.Finished = bool(v)
	}
	return p, nil
}

// SavePosition records where a poller is in a shard.
func (st *Store) SavePosition(ctx context.Context, poller, streamARN, shardID string, p ShardPosition) error {
	it := positionKey(poller, streamARN, shardID)
	if p.Sequence != "" {
		it["sequence_number"] = avS(p.Sequence)
	}
	it["finished"] = &types.AttributeValueMemberBOOL{Value: p.Finished}
	it["updated_time_epoch"] = avN(strconv.FormatInt(time.Now().Unix(), 10))
	it["expires_at"] = avN(strconv.FormatInt(time.Now().Add(positionTTL).Unix(), 10))
	if _, err := st.api.PutItem(ctx, &dynamodb.PutItemInput{TableName: st.table(TableStreamPosition), Item: it}); err != nil {
		return fmt.Errorf("save the position in shard %s: %w", shardID, err)
	}
	return nil
}
