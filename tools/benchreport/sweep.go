package main

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	awsdynamodb "github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/google/uuid"

	"github.com/whimbrel/whimbrel/monitor"
	"github.com/whimbrel/whimbrel/state"
	"github.com/whimbrel/whimbrel/state/dynamodb"
)

// sweepCost is what a monitor sweep costs over an empty history and over
// a long one, and what its adoption scan costs.

type sweepCost struct {
	calls        [2]int
	reads        [2]float64
	took         [2]time.Duration
	writeSeconds float64
	// The adoption scan over the history (nothing to stamp): a sweep's
	// default budget from the table's start, and a whole pass.
	adoptCalls, adoptPassCalls int
	adoptReads, adoptPassReads float64
	adoptPassWrites            float64
}

// measureSweep measures a monitor sweep over an empty history and over one
// of n finished activities (written directly, as a long history would
// have left them).
func measureSweep(ctx context.Context, endpoint string, n int) (sweepCost, error) {
	var res sweepCost
	var c counter
	prefix := "sweep_" + uuid.NewString()[:8] + "_"
	api := client(endpoint)
	st := dynamodb.New(api, dynamodb.Options{Prefix: prefix, Capacity: c.record})
	if _, err := st.Install(ctx, false); err != nil {
		return res, err
	}
	sweep := func(i int) error {
		c.take("")
		began := time.Now()
		// Its judging alone: the adoption scan is measured below.
		if _, err := monitor.New(st, monitor.Config{AdoptPages: -1}).Sweep(ctx); err != nil {
			return err
		}
		res.took[i] = time.Since(began)
		p := c.take("")
		res.calls[i], res.reads[i] = p.calls, p.read+p.write
		return nil
	}
	if err := sweep(0); err != nil {
		return res, err
	}
	began := time.Now()
	const perWorkflow = 100
	var wg sync.WaitGroup
	errs := make(chan error, 4)
	for g := 0; g < 4; g++ {
		wg.Add(1)
		go func(g int) {
			defer wg.Done()
			var batch []types.WriteRequest
			flush := func(table string) error {
				for len(batch) > 0 {
					out, err := api.BatchWriteItem(ctx, &awsdynamodb.BatchWriteItemInput{RequestItems: map[string][]types.WriteRequest{prefix + table: batch}})
					if err != nil {
						return err
					}
					batch = out.UnprocessedItems[prefix+table]
				}
				return nil
			}
			epoch := &types.AttributeValueMemberN{Value: strconv.FormatInt(time.Now().Add(-24*time.Hour).Unix(), 10)}
			for w := g; w*perWorkflow < n; w += 4 {
				wid := fmt.Sprintf("old::%08d-0000-4000-8000-000000000000", w)
				stateShard, nameShard := dynamodb.WorkflowShards(wid, "old", state.WorkflowCompleted)
				batch = append(batch, types.WriteRequest{PutRequest: &types.PutRequest{Item: map[string]types.AttributeValue{
					"workflow_exec_id": &types.AttributeValueMemberS{Value: wid}, "workflow_name": &types.AttributeValueMemberS{Value: "old"},
					"state": &types.AttributeValueMemberS{Value: "COMPLETED"}, "start_time_epoch": epoch,
					dynamodb.AttrStateShard: &types.AttributeValueMemberS{Value: stateShard}, dynamodb.AttrNameShard: &types.AttributeValueMemberS{Value: nameShard}}}})
				if err := flush("workflow_exec"); err != nil {
					errs <- err
					return
				}
				for a := 0; a < perWorkflow && w*perWorkflow+a < n; a++ {
					batch = append(batch, types.WriteRequest{PutRequest: &types.PutRequest{Item: map[string]types.AttributeValue{
						"activity_exec_id": &types.AttributeValueMemberS{Value: fmt.Sprintf("a%03d::%08d-0000-4000-8000-%012d", a, w, a)},
						"workflow_exec_id": &types.AttributeValueMemberS{Value: wid},
						"state":            &types.AttributeValueMemberS{Value: "COMPLETED"}, "state_time_epoch": epoch}}})
					if len(batch) == 25 {
						if err := flush("activity_exec"); err != nil {
							errs <- err
							return
						}
					}
				}
				if err := flush("activity_exec"); err != nil {
					errs <- err
					return
				}
			}
		}(g)
	}
	wg.Wait()
	close(errs)
	if err := <-errs; err != nil {
		return res, err
	}
	res.writeSeconds = time.Since(began).Seconds()
	if err := sweep(1); err != nil {
		return res, err
	}
	return res, measureAdopt(ctx, api, prefix, n, &res)
}

// measureAdopt measures the monitor's adoption scan over the history: one
// sweep's default budget, and a whole pass over the tables.
func measureAdopt(ctx context.Context, api *awsdynamodb.Client, prefix string, n int, res *sweepCost) error {
	var c counter
	if _, err := dynamodb.New(api, dynamodb.Options{Prefix: prefix, Capacity: c.record}).Adopt(ctx, monitor.DefaultAdoptPages); err != nil {
		return fmt.Errorf("adoption: %w", err)
	}
	p := c.take("")
	res.adoptCalls, res.adoptReads = p.calls, p.read
	if _, err := dynamodb.New(api, dynamodb.Options{Prefix: prefix, Capacity: c.record}).Adopt(ctx, n/dynamodb.AdoptPageItems+2); err != nil {
		return fmt.Errorf("adoption pass: %w", err)
	}
	p = c.take("")
	res.adoptPassCalls, res.adoptPassReads, res.adoptPassWrites = p.calls, p.read, p.write
	return nil
}

func writeSweep(b *strings.Builder, sw sweepCost, n int) {
	fmt.Fprintf(b, "## Monitor sweep cost against history\n\nOne `whimbrel-monitor` sweep over empty tables, then over %d finished activities (in %d COMPLETED workflows, written in %.0f s):\n\n", n, (n+99)/100, sw.writeSeconds)
	fmt.Fprintf(b, "| history | store calls | capacity units | took |\n| ---: | ---: | ---: | ---: |\n")
	fmt.Fprintf(b, "| 0 | %d | %.1f | %s |\n| %d | %d | %.1f | %s |\n\n", sw.calls[0], sw.reads[0], sw.took[0].Round(time.Millisecond), n, sw.calls[1], sw.reads[1], sw.took[1].Round(time.Millisecond))
	fmt.Fprintf(b, "A sweep reads the %d shards of each live state of the activity state index and of RUNNING and REQUESTED on the workflow state index (the history's workflows carry their COMPLETED shards, as Whimbrel writes them): finished activities are in no shard and COMPLETED workflows in shards a sweep does not read, so its cost does not grow with history; but each state it reads is %d Queries (`scripts/dynamodb-local run -- go run ./tools/benchreport -sweep`).\n\n", dynamodb.StateShards, dynamodb.StateShards)
	items := n + (n+99)/100
	fmt.Fprintf(b, "The table above is the sweep's judging (`AdoptPages: -1`). Each sweep also runs the adoption scan, which finds the items foreign writers left without shard attributes: it reads history, a bounded page budget at a time. Over the same %d items (nothing to stamp): one sweep's default budget (%d pages of %d items of each table) took %d Scans and %.1f read units; a whole pass over both tables %d Scans, %.1f read units (%.1f per 1,000 items) and %.0f write units. A foreign item is found within %d sweeps here.\n\n",
		items, monitor.DefaultAdoptPages, dynamodb.AdoptPageItems, sw.adoptCalls, sw.adoptReads, sw.adoptPassCalls, sw.adoptPassReads, sw.adoptPassReads*1000/float64(items), sw.adoptPassWrites,
		(n+monitor.DefaultAdoptPages*dynamodb.AdoptPageItems-1)/(monitor.DefaultAdoptPages*dynamodb.AdoptPageItems))
}
