package dynamodb

import (
	"context"
	"fmt"
	"sync"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/expression"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/whimbrel/whimbrel/state"
)

// AdoptPageItems is how many items one page of the adoption scan reads
// (before its filter: DynamoDB charges for what it reads, not for what it
// returns). DynamoDB also ends a page at 1 MB, so a page of large items
// (workflows carry their definitions) holds fewer: the scan counts the
// items it read, not the pages it got, up to adoptCallsPerPage calls for
// each page of its budget.
const AdoptPageItems = 1000

// adoptCallsPerPage bounds the Scan calls of a page's budget: pages of
// large items (100 of 10 KB in 1 MB) still cover a page's items, and a
// table of tiny pages does not make a sweep thousands of calls long.
const adoptCallsPerPage = 10

// adoption is where the adoption scan of each table stopped.
type adoption struct {
	mu   sync.Mutex
	from map[string]item // by table base name; nil: from the start
}

// Adopt puts the live items that another client wrote without their shard
// attributes (a Full Logic API client writes the base contract's only)
// under their shards, so that the launcher and the monitor, which read
// only the sharded indexes, find them. It reads at most pages ×
// AdoptPageItems items of workflow_exec and of activity_exec each, with a
// filtered, projected, eventually consistent Scan, from where the last call
// on this Store stopped, wrapping round at the end of the table: a table of
// N items is covered in N ÷ (pages × AdoptPageItems) calls. Each item is
// stamped as a read by ID stamps it (restamp): one conditional write that
// holds only while the item is still in the state the scan read. Ended
// activities need nothing: they leave the index. It returns how many items
// it stamped; a pass over items that all carry their shards writes nothing.
func (st *Store) Adopt(ctx context.Context, pages int) (int, error) {
	st.adopt.mu.Lock()
	defer st.adopt.mu.Unlock()
	if st.adopt.from == nil {
		st.adopt.from = map[string]item{}
	}
	live := make([]expression.OperandBuilder, 0, len(activityStamps.legacyStates))
	for _, s := range activityStamps.legacyStates {
		live = append(live, expression.Value(avS(s)))
	}
	unstamped := expression.AttributeNotExists(expression.Name(AttrStateShard))
	tables := []struct {
		sp     stamping
		filter expression.ConditionBuilder
		read   []string // what restamp needs, and the index's range key
	}{
		{workflowStamps, unstamped.Or(expression.AttributeNotExists(expression.Name(AttrNameShard))),
			[]string{"workflow_exec_id", "workflow_name", "state", AttrStateShard, AttrNameShard, "start_time_epoch"}},
		{activityStamps, unstamped.And(expression.Name("state").In(live[0], live[1:]...)),
			[]string{"activity_exec_id", "workflow_exec_id", "workflow_name", "state", AttrStateShard, "state_time_epoch", state.AttrRetryWait}},
	}
	stamped := 0
	for _, tb := range tables {
		var proj expression.ProjectionBuilder
		for _, a := range tb.read {
			proj = proj.AddNames(expression.Name(a))
		}
		expr, err := expression.NewBuilder().WithFilter(tb.filter).WithProjection(proj).Build()
		if err != nil {
			return stamped, fmt.Errorf("adopt the items of %s: %w", st.prefix+tb.sp.base, err)
		}
		budget, calls := max(pages, 0)*AdoptPageItems, max(pages, 0)*adoptCallsPerPage
		for ; budget > 0 && calls > 0; calls-- {
			out, err := st.api.Scan(ctx, &dynamodb.ScanInput{
				TableName:                 st.table(tb.sp.base),
				Limit:                     aws.Int32(int32(min(budget, AdoptPageItems))),
				ExclusiveStartKey:         st.adopt.from[tb.sp.base],
				FilterExpression:          expr.Filter(),
				ProjectionExpression:      expr.Projection(),
				ExpressionAttributeNames:  expr.Names(),
				ExpressionAttributeValues: expr.Values(),
				ReturnConsumedCapacity:    st.returnCapacity(),
			})
			if err != nil {
				return stamped, fmt.Errorf("scan %s for items without their shards: %w", st.prefix+tb.sp.base, err)
			}
			st.report("Adopt", reportOne(out.ConsumedCapacity)...)
			budget -= max(int(out.ScannedCount), 1)
			for _, m := range out.Items {
				if st.restamp(ctx, tb.sp, fromAVItem(m)) {
					stamped++
				}
			}
			st.adopt.from[tb.sp.base] = out.LastEvaluatedKey // nil at the end: round again
			if len(out.LastEvaluatedKey) == 0 {
				break // the rest of the budget would read the same items again
			}
		}
	}
	return stamped, nil
}
