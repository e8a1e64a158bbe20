package dynamodb

import (
	"context"
	"fmt"
	"sort"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/whimbrel/whimbrel/state"
	"github.com/whimbrel/whimbrel/state/internal/attr"
)

// Dependencies implements state.Store.
func (st *Store) Dependencies(ctx context.Context, workflowExecID string) ([]state.Dependency, error) {
	out, err := st.dependencyItems(ctx, "Dependencies", indexWorkflow, "workflow_exec_id", workflowExecID)
	if _, other := state.Skipped(err); other != nil {
		return nil, fmt.Errorf("list dependencies of %s: %w", workflowExecID, err)
	}
	return out, err
}

// Dependents implements state.Store.
func (st *Store) Dependents(ctx context.Context, activityExecID string) ([]state.Dependency, error) {
	out, err := st.dependencyItems(ctx, "Dependents", indexDependent, "dependent_activity_exec_id", activityExecID)
	if _, other := state.Skipped(err); other != nil {
		return nil, fmt.Errorf("list dependents of %s: %w", activityExecID, err)
	}
	return out, err
}

// dependencyItems reads the dependency items an index lists under a key,
// ordered by ID.
func (st *Store) dependencyItems(ctx context.Context, op, index, keyAttr, value string) ([]state.Dependency, error) {
	var out []state.Dependency
	skips := st.undecoded.NewSkips()
	err := st.query(ctx, op, &dynamodb.QueryInput{
		TableName:                 st.table(TableActivityDependency),
		IndexName:                 aws.String(index),
		KeyConditionExpression:    aws.String("#k = :v"),
		ExpressionAttributeNames:  map[string]string{"#k": keyAttr},
		ExpressionAttributeValues: map[string]types.AttributeValue{":v": avS(value)},
	}, 0, func(m item) error {
		d, err := attr.DecodeDependency(st.prefix+TableActivityDependency, fromAVItem(m))
		if err != nil {
			return skips.Add(err)
		}
		out = append(out, d)
		return nil
	})
	if err != nil {
		return nil, err
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out, skips.Err()
}

// ResolveDependency implements state.Store. Removing the edge with DELETE
// under a contains() condition counts it exactly once however often it is
// replayed, which a counter could not.
func (st *Store) ResolveDependency(ctx context.Context, waiting state.ActivityKey, upstreamID string) (*state.ActivityExec, bool, error) {
	cond, upd := attr.ResolveDependency(upstreamID)
	m, old, err := st.update(ctx, "ResolveDependency", TableActivityExec, toAVItem(attr.ActivityKey(waiting)), cond, upd)
	if err != nil {
		return nil, false, fmt.Errorf("resolve dependency of %s on %s: %w", waiting.ActivityExecID, upstreamID, err)
	}
	resolved := m != nil
	if !resolved {
		if old == nil {
			return nil, false, &state.NotFoundError{Kind: "activity", ID: waiting.ActivityExecID}
		}
		m = old // already resolved: the item as it stands
	}
	a, err := attr.DecodeActivity(st.prefix+TableActivityExec, m)
	if err != nil && a.State.Valid() && a.ActivityExecID != "" {
		st.log.Warn("an activity the store wrote has a malformed attribute", "error", err)
		err = nil
	}
	return a, resolved, err
}
