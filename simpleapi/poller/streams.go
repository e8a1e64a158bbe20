package poller

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awsdynamodb "github.com/aws/aws-sdk-go-v2/service/dynamodb"
	ddbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/dynamodbstreams"
	"github.com/hashicorp/go-hclog"

	"github.com/whimbrel/whimbrel/state/dynamodb"
)

// What the stream poller needs of DynamoDB besides the stream records:
// where the streams are, and where it is in each shard.

// OpenStreams returns a DynamoDB Streams client from the SDK's default
// chain. Without AWS_ENDPOINT_URL_DYNAMODB_STREAMS it uses
// AWS_ENDPOINT_URL_DYNAMODB, as DynamoDB Local serves both on one endpoint.
func OpenStreams(ctx context.Context, log hclog.Logger) (*dynamodbstreams.Client, error) {
	cfg, err := dynamodb.LoadConfig(ctx, log)
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
func StreamARN(ctx context.Context, st *dynamodb.Store, base string) (string, error) {
	name := st.Table(base)
	out, err := st.API().DescribeTable(ctx, &awsdynamodb.DescribeTableInput{TableName: aws.String(name)})
	if err != nil {
		return "", fmt.Errorf("describe table %s: %w", name, err)
	}
	sp := out.Table.StreamSpecification
	if sp == nil || !aws.ToBool(sp.StreamEnabled) || aws.ToString(out.Table.LatestStreamArn) == "" {
		return "", fmt.Errorf("table %s has no stream: run `whimbrel install` to enable it", name)
	}
	if sp.StreamViewType != ddbtypes.StreamViewTypeNewImage && sp.StreamViewType != ddbtypes.StreamViewTypeNewAndOldImages {
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

// StorePositions keeps the positions in the store's stream_position table.
type StorePositions struct{ Store *dynamodb.Store }

// positionKey: each poller (by name) keeps its own positions, as pollers
// of different names apply different records.
func positionKey(poller, streamARN, shardID string) map[string]ddbtypes.AttributeValue {
	return map[string]ddbtypes.AttributeValue{"poller": &ddbtypes.AttributeValueMemberS{Value: poller},
		"shard": &ddbtypes.AttributeValueMemberS{Value: streamARN + "#" + shardID}}
}

// Position implements Positions: the zero ShardPosition if the poller has
// not been in the shard.
func (sp StorePositions) Position(ctx context.Context, poller, streamARN, shardID string) (ShardPosition, error) {
	st := sp.Store
	out, err := st.API().GetItem(ctx, &awsdynamodb.GetItemInput{
		TableName: aws.String(st.Table(dynamodb.TableStreamPosition)), Key: positionKey(poller, streamARN, shardID),
		ConsistentRead: aws.Bool(true), ReturnConsumedCapacity: st.ReturnCapacity(),
	})
	if err != nil {
		return ShardPosition{}, fmt.Errorf("read the position in shard %s: %w", shardID, err)
	}
	if out.ConsumedCapacity != nil {
		st.Report("Position", *out.ConsumedCapacity)
	}
	var p ShardPosition
	if v, ok := out.Item["sequence_number"].(*ddbtypes.AttributeValueMemberS); ok {
		p.Sequence = v.Value
	}
	if v, ok := out.Item["finished"].(*ddbtypes.AttributeValueMemberBOOL); ok {
		p.Finished = v.Value
	}
	return p, nil
}

// SavePosition implements Positions.
func (sp StorePositions) SavePosition(ctx context.Context, poller, streamARN, shardID string, p ShardPosition) error {
	st := sp.Store
	it := positionKey(poller, streamARN, shardID)
	if p.Sequence != "" {
		it["sequence_number"] = &ddbtypes.AttributeValueMemberS{Value: p.Sequence}
	}
	it["finished"] = &ddbtypes.AttributeValueMemberBOOL{Value: p.Finished}
	it["updated_time_epoch"] = &ddbtypes.AttributeValueMemberN{Value: strconv.FormatInt(time.Now().Unix(), 10)}
	it["expires_at"] = &ddbtypes.AttributeValueMemberN{Value: strconv.FormatInt(time.Now().Add(positionTTL).Unix(), 10)}
	if _, err := st.API().PutItem(ctx, &awsdynamodb.PutItemInput{TableName: aws.String(st.Table(dynamodb.TableStreamPosition)), Item: it}); err != nil {
		return fmt.Errorf("save the position in shard %s: %w", shardID, err)
	}
	return nil
}
