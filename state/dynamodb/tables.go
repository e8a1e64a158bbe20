package dynamodb

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/whimbrel/whimbrel/state"
	"github.com/whimbrel/whimbrel/state/internal/attr"
)

// DefaultPrefix is the contract's default table prefix.
const DefaultPrefix = state.DefaultTablePrefix

// The tables, by name without prefix: the contract's (see state).
const (
	TableInstallStatus      = state.TableInstallStatus
	TableWorkflowRequest    = state.TableWorkflowRequest
	TableActivityEvent      = state.TableActivityEvent
	TableWorkflowExec       = state.TableWorkflowExec
	TableActivityExec       = state.TableActivityExec
	TableActivityDependency = state.TableActivityDependency
	TableWorkflowLambda     = state.TableWorkflowLambda
	// TableStreamPosition is Whimbrel's own: the stream poller keeps its
	// place in each shard there, so a restart resumes where it left.
	TableStreamPosition = "stream_position"
)

// The indexes. The base contract calls them local indexes, but a local index
// can only be queried within one partition key, and the launcher and monitor
// query across workflows, so they are global (docs/contract.md#indexes).
const (
	// indexLegacyState (activity_exec): state + state_time_epoch, keys
	// only: the state index before it was sharded (schema version 2). A
	// fresh install does not create it, for it holds every item and all
	// READY ones under one key; install leaves it on a table that has it,
	// for launchers and monitors older than the sharded index, until the
	// operator deletes it (docs/operations.md#upgrading-and-index-migrations).
	// The state index is indexStateShard (shard.go): the launcher finds READY
	// activities and the monitor every live one through it. It projects
	// keys only, and heartbeat_time_epoch is deliberately no index key, so
	// a heartbeat writes to no index.
	indexLegacyState = "state-index"
	// indexWorkflow (activity_exec, dependency): the items of one workflow.
	indexWorkflow = "workflow-index"
	// indexDependent (dependency): the activities that wait on one activity.
	indexDependent = "dependent-index"
	// workflow_exec's state-index (state + start_time_epoch, also
	// indexLegacyState) and name-index (workflow_name +
	// start_time_epoch) are the workflow indexes before they were
	// sharded (schema version 3). Like the activity state index, a fresh
	// install does not create them, and install leaves them on a table
	// that has them, for readers older than the sharded indexes, until
	// the operator deletes them. The workflow indexes now are
	// indexStateShard and indexNameShard (shard.go).
	// indexActivity (activity_event): the events of one activity in the
	// order of their when, all attributes. The base contract's local index
	// on activity_exec_id.
	indexActivity = "activity-index"
)

// workflowIndexAttrs are the workflow_exec attributes the workflow indexes
// carry besides keys: enough to list executions without the definition.
var workflowIndexAttrs = []string{
	"workflow_request_id", "start_time", "end_time", "end_time_epoch", "source", "reason",
}

// schemaVersion is recorded in install_status for every table; raise it when
// a table gains what an older install lacks.
const schemaVersion = 4

type keyAttr struct {
	name string
	typ  types.ScalarAttributeType
}

type index struct {
	name       string
	hash       keyAttr
	rng        *keyAttr
	projection types.ProjectionType
	include    []string
}

type tableDef struct {
	base        string
	description string
	hash        keyAttr
	rng         *keyAttr
	indexes     []index
	// ttl: the table's items expire by expires_at (an execution's items,
	// once it settled under a retention).
	ttl bool
	// stream: the table has a stream of new images, which the Simple
	// Lambda API's processors read.
	stream bool
}

func s(name string) keyAttr   { return keyAttr{name, types.ScalarAttributeTypeS} }
func n(name string) keyAttr   { return keyAttr{name, types.ScalarAttributeTypeN} }
func ps(name string) *keyAttr { a := s(name); return &a }
func pn(name string) *keyAttr { a := n(name); return &a }

// tableDefs are the contract's seven tables with their key schemas
// (docs/contract.md#tables), and the stream poller's positions.
var tableDefs = []tableDef{
	{base: TableInstallStatus, description: "installed version of each Whimbrel object",
		hash: s("object_id"), rng: ps("object_type")},
	{base: TableWorkflowRequest, ttl: true, stream: true, description: "requests to start a workflow (write-once)",
		hash: s("workflow_request_id"), rng: ps("workflow_name")},
	{base: TableActivityEvent, ttl: true, stream: true, description: "requested activity transitions (write-once)",
		hash: s("activity_event_id"), rng: ps("activity_exec_id"),
		indexes: []index{
			{name: indexActivity, hash: s("activity_exec_id"), rng: pn("when_epoch"), projection: types.ProjectionTypeAll},
		}},
	{base: TableWorkflowExec, ttl: true, description: "workflow executions; " +
		shardsDescription(indexStateShard, AttrStateShard, "state") + "; " + shardsDescription(indexNameShard, AttrNameShard, "name"),
		hash: s("workflow_exec_id"), rng: ps("workflow_name"),
		indexes: []index{
			{name: indexStateShard, hash: s(AttrStateShard), rng: pn("start_time_epoch"),
				projection: types.ProjectionTypeInclude, include: append([]string{"state", AttrNameShard}, workflowIndexAttrs...)},
			{name: indexNameShard, hash: s(AttrNameShard), rng: pn("start_time_epoch"),
				projection: types.ProjectionTypeInclude, include: append([]string{"state", AttrStateShard}, workflowIndexAttrs...)},
		}},
	{base: TableActivityExec, ttl: true, description: "activity executions; " + shardsDescription(indexStateShard, AttrStateShard, "state"),
		hash: s("activity_exec_id"), rng: ps("workflow_exec_id"),
		indexes: []index{
			{name: indexStateShard, hash: s(AttrStateShard), rng: pn("state_time_epoch"), projection: types.ProjectionTypeKeysOnly},
			{name: indexWorkflow, hash: s("workflow_exec_id"), rng: ps("activity_exec_id"), projection: types.ProjectionTypeKeysOnly},
		}},
	{base: TableActivityDependency, ttl: true, description: "which activity waits on which (write-once)",
		hash: s("activity_exec_dependency"), rng: ps("activity_exec_id"),
		indexes: []index{
			{name: indexWorkflow, hash: s("workflow_exec_id"), projection: types.ProjectionTypeAll},
			{name: indexDependent, hash: s("dependent_activity_exec_id"), projection: types.ProjectionTypeAll},
		}},
	{base: TableWorkflowLambda, description: "registered workflows, and the Lambda function that handles each",
		hash: s("workflow_name")},
	{base: TableStreamPosition, ttl: true, description: "where each stream poller is in each shard",
		hash: s("poller"), rng: ps("shard")},
	scheduleTable,     // schedule.go
	poolTable,         // pool.go
	notificationTable, // notification.go
}

// streamSpec is the stream the Simple Lambda API's tables have: new images,
// as a processor needs the item inserted.
func streamSpec() *types.StreamSpecification {
	return &types.StreamSpecification{StreamEnabled: aws.Bool(true), StreamViewType: types.StreamViewTypeNewImage}
}

func keySchema(hash keyAttr, rng *keyAttr) []types.KeySchemaElement {
	ks := []types.KeySchemaElement{{AttributeName: aws.String(hash.name), KeyType: types.KeyTypeHash}}
	if rng != nil {
		ks = append(ks, types.KeySchemaElement{AttributeName: aws.String(rng.name), KeyType: types.KeyTypeRange})
	}
	return ks
}

func (ix index) gsi() types.GlobalSecondaryIndex {
	p := &types.Projection{ProjectionType: ix.projection}
	if len(ix.include) > 0 {
		p.NonKeyAttributes = ix.include
	}
	return types.GlobalSecondaryIndex{
		IndexName:  aws.String(ix.name),
		KeySchema:  keySchema(ix.hash, ix.rng),
		Projection: p,
	}
}

// attributeDefinitions lists every key attribute of the table and the
// indexes given, once each.
func (t tableDef) attributeDefinitions(indexes []index) []types.AttributeDefinition {
	var defs []types.AttributeDefinition
	seen := map[string]bool{}
	add := func(a *keyAttr) {
		if a == nil || seen[a.name] {
			return
		}
		seen[a.name] = true
		defs = append(defs, types.AttributeDefinition{AttributeName: aws.String(a.name), AttributeType: a.typ})
	}
	add(&t.hash)
	add(t.rng)
	for _, ix := range indexes {
		add(&ix.hash)
		add(ix.rng)
	}
	return defs
}

// TTLTables lists the tables (without prefix) whose items expire by
// expires_at.
func TTLTables() []string {
	var out []string
	for _, t := range tableDefs {
		if t.ttl {
			out = append(out, t.base)
		}
	}
	return out
}

// CreateTableInputs returns the CreateTable requests Install sends for the
// given prefix. The CloudFormation template is checked against them.
func CreateTableInputs(prefix string) []*dynamodb.CreateTableInput {
	var out []*dynamodb.CreateTableInput
	for _, t := range tableDefs {
		out = append(out, t.createInput(prefix))
	}
	return out
}

func (t tableDef) createInput(prefix string) *dynamodb.CreateTableInput {
	in := &dynamodb.CreateTableInput{
		TableName:            aws.String(prefix + t.base),
		KeySchema:            keySchema(t.hash, t.rng),
		AttributeDefinitions: t.attributeDefinitions(t.indexes),
		BillingMode:          types.BillingModePayPerRequest,
	}
	for _, ix := range t.indexes {
		in.GlobalSecondaryIndexes = append(in.GlobalSecondaryIndexes, ix.gsi())
	}
	if t.stream {
		in.StreamSpecification = streamSpec()
	}
	return in
}

// DefaultTableWait bounds how long Install waits for a table or index to
// become active. Real DynamoDB takes seconds to minutes for a new index on
// a large table.
const DefaultTableWait = 10 * time.Minute

// Install creates the missing tables and indexes, waits until they are
// active, and records each table's version in install_status. It never
// drops or alters data; a table whose key schema differs from Whimbrel's is
// reported as an error. On a dry run it only says what it would do. A second
// run does nothing and returns no actions.
func (st *Store) Install(ctx context.Context, dryRun bool) ([]state.InstallAction, error) {
	var actions []state.InstallAction
	var created []string
	for _, t := range tableDefs {
		name := st.prefix + t.base
		obj := "table " + name
		out, err := st.api.DescribeTable(ctx, &dynamodb.DescribeTableInput{TableName: aws.String(name)})
		var nf *types.ResourceNotFoundException
		switch {
		case errors.As(err, &nf):
			actions = append(actions, state.InstallAction{Object: obj, Action: "create"})
			if dryRun {
				continue
			}
			if _, err := st.api.CreateTable(ctx, t.createInput(st.prefix)); err != nil {
				var inUse *types.ResourceInUseException
				if !errors.As(err, &inUse) { // another installer is creating it: just wait
					return actions, fmt.Errorf("create table %s: %w", name, err)
				}
			}
			created = append(created, name)
			continue
		case err != nil:
			return actions, fmt.Errorf("describe table %s: %w", name, err)
		}
		if err := t.checkKeys(out.Table); err != nil {
			return actions, err
		}
		if !dryRun && !active(out.Table) {
			// Another installer, or one that died, left it being built.
			created = append(created, name)
		}
		missing := t.missingIndexes(out.Table)
		present := t.presentIndexes(out.Table)
		for _, ix := range missing {
			actions = append(actions, state.InstallAction{Object: obj, Action: "add index " + ix.name})
			if dryRun {
				continue
			}
			// DynamoDB adds one index per UpdateTable call, and refuses a
			// new one while another is still being built.
			if _, err := st.api.UpdateTable(ctx, &dynamodb.UpdateTableInput{
				TableName: aws.String(name),
				// The key attributes of every index the table will have,
				// not only the new one's, and of the ones Whimbrel no
				// longer makes but the table still has (the legacy state
				// index): the definitions replace the old.
				AttributeDefinitions: withExisting(t.attributeDefinitions(append(present, ix)), out.Table),
				GlobalSecondaryIndexUpdates: []types.GlobalSecondaryIndexUpdate{{
					Create: &types.CreateGlobalSecondaryIndexAction{
						IndexName: aws.String(ix.name), KeySchema: keySchema(ix.hash, ix.rng),
						Projection: ix.gsi().Projection,
					},
				}},
			}); err != nil {
				return actions, fmt.Errorf("add index %s to table %s: %w", ix.name, name, err)
			}
			if err := st.waitActive(ctx, name); err != nil {
				return actions, err
			}
			present = append(present, ix)
		}
		for _, sp := range []stamping{activityStamps, workflowStamps} {
			if sp.base != t.base {
				continue
			}
			act, err := st.backfillShards(ctx, sp, out.Table, dryRun)
			if err != nil {
				return actions, err
			}
			if act != nil {
				actions = append(actions, *act)
			}
		}
	}
	for _, name := range created {
		if err := st.waitActive(ctx, name); err != nil {
			return actions, err
		}
	}
	for _, t := range tableDefs {
		act, err := st.enableStream(ctx, t, dryRun)
		if err != nil {
			return actions, err
		}
		if act != nil {
			actions = append(actions, *act)
		}
	}
	for _, t := range tableDefs {
		act, err := st.enableTTL(ctx, t, dryRun)
		if err != nil {
			return actions, err
		}
		if act != nil {
			actions = append(actions, *act)
		}
	}
	for _, t := range tableDefs {
		act, err := st.recordVersion(ctx, t, dryRun)
		if err != nil {
			return actions, err
		}
		if act != nil {
			actions = append(actions, *act)
		}
	}
	return actions, nil
}

// enableTTL turns on TTL by expires_at where the table wants it and it is
// off.
func (st *Store) enableTTL(ctx context.Context, t tableDef, dryRun bool) (*state.InstallAction, error) {
	if !t.ttl {
		return nil, nil
	}
	name := st.prefix + t.base
	act := &state.InstallAction{Object: "table " + name, Action: "enable TTL on " + attr.ExpiresAt}
	out, err := st.api.DescribeTimeToLive(ctx, &dynamodb.DescribeTimeToLiveInput{TableName: aws.String(name)})
	var nf *types.ResourceNotFoundException
	switch {
	case dryRun && errors.As(err, &nf):
		return act, nil
	case err != nil:
		return nil, fmt.Errorf("describe TTL of %s: %w", name, err)
	}
	if d := out.TimeToLiveDescription; d != nil && (d.TimeToLiveStatus == types.TimeToLiveStatusEnabled || d.TimeToLiveStatus == types.TimeToLiveStatusEnabling) {
		if got := aws.ToString(d.AttributeName); got != attr.ExpiresAt {
			return nil, fmt.Errorf("table %s has TTL on %q, but Whimbrel expires items by %q: switch it off, then run install again", name, got, attr.ExpiresAt)
		}
		return nil, nil
	}
	if dryRun {
		return act, nil
	}
	if _, err := st.api.UpdateTimeToLive(ctx, &dynamodb.UpdateTimeToLiveInput{
		TableName:               aws.String(name),
		TimeToLiveSpecification: &types.TimeToLiveSpecification{AttributeName: aws.String(attr.ExpiresAt), Enabled: aws.Bool(true)},
	}); err != nil {
		return nil, fmt.Errorf("enable TTL on %s: %w", name, err)
	}
	return act, nil
}

// enableStream turns on the table's stream of new images where the table
// wants one and has none (a table installed before the Simple Lambda API).
func (st *Store) enableStream(ctx context.Context, t tableDef, dryRun bool) (*state.InstallAction, error) {
	if !t.stream {
		return nil, nil
	}
	name := st.prefix + t.base
	act := &state.InstallAction{Object: "table " + name, Action: "enable stream (new images)"}
	out, err := st.api.DescribeTable(ctx, &dynamodb.DescribeTableInput{TableName: aws.String(name)})
	var nf *types.ResourceNotFoundException
	switch {
	case dryRun && errors.As(err, &nf):
		return nil, nil // created with its stream
	case err != nil:
		return nil, fmt.Errorf("describe table %s: %w", name, err)
	}
	if sp := out.Table.StreamSpecification; sp != nil && aws.ToBool(sp.StreamEnabled) {
		if sp.StreamViewType != types.StreamViewTypeNewImage && sp.StreamViewType != types.StreamViewTypeNewAndOldImages {
			return nil, fmt.Errorf("table %s has a stream of %s, but the Simple Lambda API needs new images: switch the stream off, then run install again", name, sp.StreamViewType)
		}
		return nil, nil
	}
	if dryRun {
		return act, nil
	}
	if _, err := st.api.UpdateTable(ctx, &dynamodb.UpdateTableInput{
		TableName: aws.String(name), StreamSpecification: streamSpec(),
	}); err != nil {
		return nil, fmt.Errorf("enable the stream of %s: %w", name, err)
	}
	if err := st.waitActive(ctx, name); err != nil {
		return nil, err
	}
	return act, nil
}

// recordVersion writes the table's install_status item unless it already
// holds this version or a newer one.
func (st *Store) recordVersion(ctx context.Context, t tableDef, dryRun bool) (*state.InstallAction, error) {
	obj := "table " + st.prefix + t.base
	act := &state.InstallAction{Object: obj, Action: fmt.Sprintf("record version %d", schemaVersion)}
	key := item{"object_id": avS(t.base), "object_type": avS("table")}
	out, err := st.api.GetItem(ctx, &dynamodb.GetItemInput{
		TableName: st.table(TableInstallStatus), Key: key, ConsistentRead: aws.Bool(true),
	})
	var nf *types.ResourceNotFoundException
	switch {
	case dryRun && errors.As(err, &nf):
		return act, nil // install_status itself does not exist yet
	case err != nil:
		return nil, fmt.Errorf("read install status of %s: %w", t.base, err)
	}
	if len(out.Item) > 0 {
		cur, err := attr.DecodeInstallStatus(st.prefix+TableInstallStatus, fromAVItem(out.Item))
		if err != nil {
			return nil, err
		}
		if cur.Version >= schemaVersion {
			return nil, nil
		}
	}
	if dryRun {
		return act, nil
	}
	status := &state.InstallStatus{ObjectID: t.base, ObjectType: "table", Version: schemaVersion, Description: t.description}
	_, err = st.api.PutItem(ctx, &dynamodb.PutItemInput{
		TableName:           st.table(TableInstallStatus),
		Item:                toAVItem(attr.EncodeInstallStatus(status)),
		ConditionExpression: aws.String("attribute_not_exists(object_id) OR version < :v"),
		ExpressionAttributeValues: map[string]types.AttributeValue{
			":v": toAV(attr.Int(schemaVersion)),
		},
	})
	var ccf *types.ConditionalCheckFailedException
	if errors.As(err, &ccf) {
		return nil, nil // a concurrent installer recorded it
	}
	if err != nil {
		return nil, fmt.Errorf("record install status of %s: %w", t.base, err)
	}
	return act, nil
}

func (st *Store) waitActive(ctx context.Context, name string) error {
	w := dynamodb.NewTableExistsWaiter(st.api, func(o *dynamodb.TableExistsWaiterOptions) {
		o.MinDelay = 200 * time.Millisecond
		o.MaxDelay = 5 * time.Second
	})
	deadline := time.Now().Add(st.tableWait)
	for {
		if time.Until(deadline) <= 0 {
			return fmt.Errorf("wait for table %s to become active: gave up after %s", name, st.tableWait)
		}
		out, err := w.WaitForOutput(ctx, &dynamodb.DescribeTableInput{TableName: aws.String(name)}, time.Until(deadline))
		if err != nil && ctx.Err() == nil && time.Until(deadline) <= 0 {
			// The wait's own bound ended it, in a call or between two.
			return fmt.Errorf("wait for table %s to become active: gave up after %s: %w", name, st.tableWait, err)
		}
		if err != nil {
			return fmt.Errorf("wait for table %s to become active: %w", name, err)
		}
		busy := false
		for _, g := range out.Table.GlobalSecondaryIndexes {
			if g.IndexStatus != types.IndexStatusActive {
				busy = true
			}
		}
		if !busy {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("wait for the indexes of table %s to become active: gave up after %s", name, st.tableWait)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(time.Second):
		}
	}
}

// checkKeys refuses a table whose key schema is not Whimbrel's: writing to
// it would fail or, worse, succeed with the wrong meaning.
func (t tableDef) checkKeys(desc *types.TableDescription) error {
	name := aws.ToString(desc.TableName)
	have := map[string]string{}
	for _, d := range desc.AttributeDefinitions {
		have[aws.ToString(d.AttributeName)] = string(d.AttributeType)
	}
	want := map[string]string{}
	for _, d := range t.attributeDefinitions(t.indexes) {
		want[aws.ToString(d.AttributeName)] = string(d.AttributeType)
	}
	if got, need := describeKeys(desc.KeySchema, have), describeKeys(keySchema(t.hash, t.rng), want); got != need {
		return fmt.Errorf("table %s exists with key schema %s, but Whimbrel needs %s: choose another --prefix, or move the table aside", name, got, need)
	}
	for _, g := range desc.GlobalSecondaryIndexes {
		for _, ix := range t.indexes {
			if aws.ToString(g.IndexName) != ix.name {
				continue
			}
			if got, need := describeKeys(g.KeySchema, have), describeKeys(keySchema(ix.hash, ix.rng), want); got != need {
				return fmt.Errorf("index %s of table %s has key schema %s, but Whimbrel needs %s: delete the index and run install again", ix.name, name, got, need)
			}
		}
	}
	return nil
}

// withExisting adds to defs the attribute definitions the table has that
// defs lacks.
func withExisting(defs []types.AttributeDefinition, desc *types.TableDescription) []types.AttributeDefinition {
	for _, d := range desc.AttributeDefinitions {
		if !slices.ContainsFunc(defs, func(x types.AttributeDefinition) bool {
			return aws.ToString(x.AttributeName) == aws.ToString(d.AttributeName)
		}) {
			defs = append(defs, d)
		}
	}
	return defs
}

// describeKeys writes a key schema with its attribute types, for messages.
func describeKeys(ks []types.KeySchemaElement, attrTypes map[string]string) string {
	var out []string
	for _, k := range ks {
		n := aws.ToString(k.AttributeName)
		out = append(out, fmt.Sprintf("%s %s (%s)", n, k.KeyType, attrTypes[n]))
	}
	return strings.Join(out, ", ")
}

// active reports whether a table and all its indexes are ACTIVE.
func active(desc *types.TableDescription) bool {
	if desc.TableStatus != types.TableStatusActive {
		return false
	}
	for _, g := range desc.GlobalSecondaryIndexes {
		if g.IndexStatus != types.IndexStatusActive {
			return false
		}
	}
	return true
}

func (t tableDef) presentIndexes(desc *types.TableDescription) []index {
	missing := t.missingIndexes(desc)
	var out []index
	for _, ix := range t.indexes {
		if !slices.ContainsFunc(missing, func(m index) bool { return m.name == ix.name }) {
			out = append(out, ix)
		}
	}
	return out
}

func (t tableDef) missingIndexes(desc *types.TableDescription) []index {
	have := map[string]bool{}
	for _, g := range desc.GlobalSecondaryIndexes {
		have[aws.ToString(g.IndexName)] = true
	}
	var missing []index
	for _, ix := range t.indexes {
		if !have[ix.name] {
			missing = append(missing, ix)
		}
	}
	return missing
}
