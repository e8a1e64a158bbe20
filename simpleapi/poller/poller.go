// Package poller reads the Simple Lambda API's two DynamoDB streams without
// Lambda (whimbrel-poller) and hands each record to the processor (package
// simpleapi). It is the only package that links the DynamoDB Streams
// client.
package poller

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	ddbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/dynamodbstreams"
	"github.com/aws/aws-sdk-go-v2/service/dynamodbstreams/types"
	"github.com/cenkalti/backoff/v4"
	"github.com/hashicorp/go-hclog"

	"github.com/whimbrel/whimbrel/simpleapi"
	"github.com/whimbrel/whimbrel/simpleapi/stream"
)

// StreamsAPI lists the DynamoDB Streams calls the poller makes;
// *dynamodbstreams.Client satisfies it.
type StreamsAPI interface {
	DescribeStream(ctx context.Context, in *dynamodbstreams.DescribeStreamInput, opts ...func(*dynamodbstreams.Options)) (*dynamodbstreams.DescribeStreamOutput, error)
	GetShardIterator(ctx context.Context, in *dynamodbstreams.GetShardIteratorInput, opts ...func(*dynamodbstreams.Options)) (*dynamodbstreams.GetShardIteratorOutput, error)
	GetRecords(ctx context.Context, in *dynamodbstreams.GetRecordsInput, opts ...func(*dynamodbstreams.Options)) (*dynamodbstreams.GetRecordsOutput, error)
}

// Positions keeps where the poller is in each shard; StorePositions
// keeps them in the stream_position table.
type Positions interface {
	Position(ctx context.Context, poller, streamARN, shardID string) (ShardPosition, error)
	SavePosition(ctx context.Context, poller, streamARN, shardID string, p ShardPosition) error
}

// Processor applies one record; stream.Processor (a *simpleapi.Processor
// behind the shared decoding) is one.
type Processor interface {
	Process(ctx context.Context, r stream.Record) error
}

// Defaults of Config.
const (
	DefaultPollInterval = 250 * time.Millisecond // Lambda polls a shard 4 times a second
	DefaultDiscovery    = 10 * time.Second       // how often the shards are listed again
)

// Config configures a Poller.
type Config struct {
	// Name keys the positions: pollers of different names (which handle
	// different workflows) keep their own.
	Name      string
	Processor Processor
	Streams   StreamsAPI
	Positions Positions
	// StreamARNs are the streams to read: workflow_request's and
	// activity_event's (see StreamARN).
	StreamARNs []string
	// PollInterval is the pause after a read that found nothing (default
	// DefaultPollInterval).
	PollInterval time.Duration
	// Discovery is how often the shards are listed again (default
	// DefaultDiscovery).
	Discovery time.Duration
	Logger    hclog.Logger
}

// Poller reads the streams without Lambda: every shard from where it last
// left (its position is saved after each batch of records) or, the first
// time, from the oldest record the stream keeps. A child shard is read
// only once its parent is finished, as Lambda does. A record the processor
// cannot apply because the store failed is retried until it can; one whose
// event waits for an earlier event is set aside and retried while the
// records behind it go on, so it holds up no other activity; a malformed
// one is reported and skipped.
type Poller struct {
	cfg Config
	log hclog.Logger
}

// New returns a Poller.
func New(cfg Config) (*Poller, error) {
	if cfg.Name == "" || cfg.Processor == nil || cfg.Streams == nil || cfg.Positions == nil || len(cfg.StreamARNs) == 0 {
		return nil, errors.New("poller: a name, a processor, a streams client, positions and at least one stream are needed")
	}
	if cfg.PollInterval <= 0 {
		cfg.PollInterval = DefaultPollInterval
	}
	if cfg.Discovery <= 0 {
		cfg.Discovery = DefaultDiscovery
	}
	if cfg.Logger == nil {
		cfg.Logger = hclog.NewNullLogger()
	}
	return &Poller{cfg: cfg, log: cfg.Logger}, nil
}

// Run reads the streams until ctx ends; it then returns nil once every
// shard reader has stopped. It returns an error only when a stream cannot
// be described at all at the start.
func (p *Poller) Run(ctx context.Context) error {
	var wg sync.WaitGroup
	defer wg.Wait()
	var mu sync.Mutex
	running := map[string]bool{}  // shard readers started, by stream/shard
	finished := map[string]bool{} // shards read to their end

	// Every stream must be there before any reader starts.
	for _, arn := range p.cfg.StreamARNs {
		if _, err := p.shards(ctx, arn); err != nil {
			return err
		}
	}
	t := time.NewTicker(p.cfg.Discovery)
	defer t.Stop()
	for {
		for _, arn := range p.cfg.StreamARNs {
			shards, err := p.shards(ctx, arn)
			if err != nil {
				if ctx.Err() == nil {
					p.log.Warn("listing the shards failed; trying again later", "stream", arn, "error", err)
				}
				continue
			}
			known := map[string]bool{}
			for _, s := range shards {
				known[aws.ToString(s.ShardId)] = true
			}
			for _, s := range shards {
				id := aws.ToString(s.ShardId)
				k := arn + "/" + id
				parent := aws.ToString(s.ParentShardId)
				mu.Lock()
				ready := !running[k] && !finished[k] && (parent == "" || !known[parent] || finished[arn+"/"+parent])
				if ready {
					running[k] = true
				}
				mu.Unlock()
				if !ready {
					continue
				}
				wg.Add(1)
				go func() {
					defer wg.Done()
					done := p.readShard(ctx, arn, id)
					mu.Lock()
					running[k] = false
					finished[k] = done
					mu.Unlock()
				}()
			}
		}
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}

// shards lists every shard of a stream.
func (p *Poller) shards(ctx context.Context, arn string) ([]types.Shard, error) {
	var out []types.Shard
	in := &dynamodbstreams.DescribeStreamInput{StreamArn: aws.String(arn)}
	for {
		d, err := p.cfg.Streams.DescribeStream(ctx, in)
		if err != nil {
			return nil, fmt.Errorf("describe stream %s: %w", arn, err)
		}
		out = append(out, d.StreamDescription.Shards...)
		last := d.StreamDescription.LastEvaluatedShardId
		if last == nil {
			return out, nil
		}
		in.ExclusiveStartShardId = last
	}
}

// readShard processes a shard's records from its saved position until the
// shard ends (it returns true) or ctx ends (false).
func (p *Poller) readShard(ctx context.Context, arn, shard string) bool {
	log := p.log.With("shard", shard)
	pos, err := retry(ctx, log, "read the shard position", func() (ShardPosition, error) {
		return p.cfg.Positions.Position(ctx, p.cfg.Name, arn, shard)
	})
	if err != nil {
		return false
	}
	if pos.Finished {
		return true
	}
	iter, err := p.iterator(ctx, log, arn, shard, pos.Sequence)
	if err != nil {
		return false
	}
	var waiting []*deferred // records waiting for an earlier event, in order
	unsaved := false        // pos.Sequence is ahead of the saved position
	save := func() bool {
		_, err := retry(ctx, log, "save the shard position", func() (struct{}, error) {
			return struct{}{}, p.cfg.Positions.SavePosition(ctx, p.cfg.Name, arn, shard, pos)
		})
		return err == nil
	}
	for iter != "" {
		out, err := p.cfg.Streams.GetRecords(ctx, &dynamodbstreams.GetRecordsInput{ShardIterator: aws.String(iter), Limit: aws.Int32(100)})
		var expired *types.ExpiredIteratorException
		var trimmed *types.TrimmedDataAccessException
		var gone *types.ResourceNotFoundException
		switch {
		case ctx.Err() != nil:
			return false
		case errors.As(err, &gone):
			log.Error("the shard or its stream is gone; not reading it", "error", err)
			return true
		case errors.As(err, &expired):
			if iter, err = p.iterator(ctx, log, arn, shard, pos.Sequence); err != nil {
				return false
			}
			continue
		case errors.As(err, &trimmed):
			// The records the iterator points at are gone: read on from
			// the oldest kept. (DynamoDB Local also answers so for an
			// iterator taken on a shard that was still empty.)
			if pos.Sequence != "" {
				log.Warn("the records after the saved position are gone from the stream (kept 24 hours); going on from the oldest kept", "sequence_number", pos.Sequence)
			}
			if !sleep(ctx, p.cfg.PollInterval) {
				return false
			}
			if iter, err = p.iterator(ctx, log, arn, shard, ""); err != nil {
				return false
			}
			continue
		case err != nil:
			log.Warn("reading records failed; trying again", "error", err)
			if !sleep(ctx, time.Second) {
				return false
			}
			continue
		}
		for _, r := range out.Records {
			rec := RecordFromStream(r)
			waits, ok := p.process(ctx, log, rec)
			if !ok {
				return false
			}
			if waits {
				waiting = append(waiting, &deferred{rec: rec, next: time.Now().Add(simpleapi.DeferFirst), delay: simpleapi.DeferFirst})
			}
			if r.Dynamodb != nil && r.Dynamodb.SequenceNumber != nil {
				pos.Sequence = aws.ToString(r.Dynamodb.SequenceNumber)
				unsaved = true
			}
		}
		var ok bool
		if waiting, ok = p.retryWaiting(ctx, log, waiting); !ok {
			return false
		}
		// The position passes a record only once every record before
		// it is done: a poller restarted reads the waiting ones again.
		if unsaved && len(waiting) == 0 {
			if !save() {
				return false
			}
			unsaved = false
		}
		iter = aws.ToString(out.NextShardIterator)
		if len(out.Records) == 0 && iter != "" && !sleep(ctx, p.cfg.PollInterval) {
			return false
		}
	}
	// A closed shard's waiting records are finished before it is.
	for len(waiting) > 0 {
		if !sleep(ctx, p.cfg.PollInterval) {
			return false
		}
		var ok bool
		if waiting, ok = p.retryWaiting(ctx, log, waiting); !ok {
			return false
		}
	}
	// The shard is closed and read to its end.
	pos.Finished = true
	if _, err := retry(ctx, log, "save the shard position", func() (struct{}, error) {
		return struct{}{}, p.cfg.Positions.SavePosition(ctx, p.cfg.Name, arn, shard, pos)
	}); err != nil {
		return false
	}
	log.Debug("shard finished")
	return true
}

// iterator returns an iterator just after seq, or at the oldest record
// kept when there is no seq or the records after it were trimmed.
func (p *Poller) iterator(ctx context.Context, log hclog.Logger, arn, shard, seq string) (string, error) {
	return retry(ctx, log, "get a shard iterator", func() (string, error) {
		in := &dynamodbstreams.GetShardIteratorInput{StreamArn: aws.String(arn), ShardId: aws.String(shard),
			ShardIteratorType: types.ShardIteratorTypeTrimHorizon}
		if seq != "" {
			in.ShardIteratorType = types.ShardIteratorTypeAfterSequenceNumber
			in.SequenceNumber = aws.String(seq)
		}
		out, err := p.cfg.Streams.GetShardIterator(ctx, in)
		var trimmed *types.TrimmedDataAccessException
		if errors.As(err, &trimmed) && seq != "" {
			log.Warn("the records after the saved position are gone from the stream (kept 24 hours); going on from the oldest kept", "sequence_number", seq)
			seq = ""
			return "", err
		}
		if err != nil {
			return "", err
		}
		return aws.ToString(out.ShardIterator), nil
	})
}

// deferred is a record set aside.
type deferred struct {
	rec   stream.Record
	next  time.Time
	delay time.Duration
}

// process applies one record, retrying while the failure may pass. It
// reports whether the record waits for an earlier event (it is then to be
// tried again later), and false for ok only when ctx ends first.
func (p *Poller) process(ctx context.Context, log hclog.Logger, rec stream.Record) (waits, ok bool) {
	_, err := retry(ctx, log, "process record "+rec.ID, func() (struct{}, error) {
		err := p.cfg.Processor.Process(ctx, rec)
		var bad *simpleapi.MalformedError
		switch {
		case errors.As(err, &bad):
			return struct{}{}, nil // reported by the processor; skipped
		case simpleapi.IsTooEarly(err):
			waits = true
			log.Debug("a record waits for an earlier event; going on with the next", "record", rec.ID, "error", err)
			return struct{}{}, nil
		}
		return struct{}{}, err
	})
	return waits, err == nil
}

// retryWaiting tries again the deferred records that are due, and returns
// those still waiting; ok is false only when ctx ended.
func (p *Poller) retryWaiting(ctx context.Context, log hclog.Logger, waiting []*deferred) (_ []*deferred, ok bool) {
	rest := waiting[:0]
	for _, d := range waiting {
		if time.Now().Before(d.next) {
			rest = append(rest, d)
			continue
		}
		waits, ok := p.process(ctx, log, d.rec)
		if !ok {
			return nil, false
		}
		if waits {
			d.delay = min(2*d.delay, simpleapi.DeferMax)
			d.next = time.Now().Add(d.delay)
			rest = append(rest, d)
		}
	}
	return rest, true
}

// retry calls fn until it succeeds or ctx ends, backing off up to a few
// seconds between tries.
func retry[T any](ctx context.Context, log hclog.Logger, what string, fn func() (T, error)) (T, error) {
	b := backoff.NewExponentialBackOff(backoff.WithInitialInterval(50*time.Millisecond),
		backoff.WithMaxInterval(5*time.Second), backoff.WithMaxElapsedTime(0))
	return backoff.RetryNotifyWithData(fn, backoff.WithContext(b, ctx), func(err error, wait time.Duration) {
		if simpleapi.IsTooEarly(err) {
			log.Debug("waiting for an earlier event", "what", what, "error", err, "wait", wait)
			return
		}
		log.Warn("failed; trying again", "what", what, "error", err, "wait", wait)
	})
}

func sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}

// RecordFromStream converts a record read from DynamoDB Streams.
func RecordFromStream(r types.Record) stream.Record {
	rec := stream.Record{ID: aws.ToString(r.EventID), EventName: string(r.EventName)}
	if d := r.Dynamodb; d != nil {
		rec.Keys = streamItem(d.Keys)
		rec.NewImage = streamItem(d.NewImage)
		if d.ApproximateCreationDateTime != nil {
			rec.Created = *d.ApproximateCreationDateTime
		}
	}
	return rec
}

func streamItem(m map[string]types.AttributeValue) map[string]ddbtypes.AttributeValue {
	if m == nil {
		return nil
	}
	out := make(map[string]ddbtypes.AttributeValue, len(m))
	for k, v := range m {
		out[k] = streamValue(v)
	}
	return out
}

// streamValue converts a DynamoDB Streams attribute value to the DynamoDB
// one: the two SDK packages declare the same union twice.
func streamValue(v types.AttributeValue) ddbtypes.AttributeValue {
	switch v := v.(type) {
	case *types.AttributeValueMemberS:
		return &ddbtypes.AttributeValueMemberS{Value: v.Value}
	case *types.AttributeValueMemberN:
		return &ddbtypes.AttributeValueMemberN{Value: v.Value}
	case *types.AttributeValueMemberB:
		return &ddbtypes.AttributeValueMemberB{Value: v.Value}
	case *types.AttributeValueMemberBOOL:
		return &ddbtypes.AttributeValueMemberBOOL{Value: v.Value}
	case *types.AttributeValueMemberNULL:
		return &ddbtypes.AttributeValueMemberNULL{Value: v.Value}
	case *types.AttributeValueMemberSS:
		return &ddbtypes.AttributeValueMemberSS{Value: v.Value}
	case *types.AttributeValueMemberNS:
		return &ddbtypes.AttributeValueMemberNS{Value: v.Value}
	case *types.AttributeValueMemberBS:
		return &ddbtypes.AttributeValueMemberBS{Value: v.Value}
	case *types.AttributeValueMemberL:
		l := make([]ddbtypes.AttributeValue, len(v.Value))
		for i, e := range v.Value {
			l[i] = streamValue(e)
		}
		return &ddbtypes.AttributeValueMemberL{Value: l}
	case *types.AttributeValueMemberM:
		return &ddbtypes.AttributeValueMemberM{Value: streamItem(v.Value)}
	}
	return &ddbtypes.AttributeValueMemberNULL{Value: true}
}
