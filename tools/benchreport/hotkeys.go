package main

import (
	"context"
	"flag"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"

	awsdynamodb "github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/google/uuid"

	"github.com/whimbrel/whimbrel/definition"
	"github.com/whimbrel/whimbrel/state"
	"github.com/whimbrel/whimbrel/state/dynamodb"
	"github.com/whimbrel/whimbrel/workflow"
)

var (
	onlyCost = flag.Bool("cost", false, "measure the capacity units and the hot keys only, and print those sections")
	hotLives = flag.Int("hot-lives", 2000, "activity lives walked through the store to count the writes on each index key")
)

// hotKeys measures the hottest index key (hotKeysSection) and writes its
// section. With -cost it prints the capacity and hot-key sections and
// tells run to stop, having written them into w.
func hotKeys(ctx context.Context, endpoint string, b, w *strings.Builder) (stop bool, err error) {
	r, err := measureHotKeys(ctx, endpoint, *hotLives)
	if err != nil {
		return false, fmt.Errorf("hot keys: %w", err)
	}
	writeHotKeys(b, r)
	if !*onlyCost {
		return false, nil
	}
	s := b.String()
	from := strings.Index(s, "## Capacity units per activity")
	to := strings.Index(s, "## Write units added by one retry")
	hot := strings.Index(s, "## The hottest index key")
	w.WriteString(s[from:to] + s[hot:])
	return true, nil
}

// trackedIndex is one index whose key writes are counted: DynamoDB writes
// an index when an item enters it (a put), leaves it (a delete), moves in
// it (both), or, for one projecting more than keys, changes in it.
type trackedIndex struct {
	table, name string
	hash, rng   string
	keysOnly    bool
}

var trackedIndexes = []trackedIndex{
	{dynamodb.TableActivityExec, "state-shard-index", dynamodb.AttrStateShard, "state_time_epoch", true},
	{dynamodb.TableActivityExec, "state-index (legacy, for comparison)", "state", "state_time_epoch", true},
	{dynamodb.TableActivityExec, "workflow-index", "workflow_exec_id", "activity_exec_id", true},
	{dynamodb.TableWorkflowExec, "state-shard-index", dynamodb.AttrStateShard, "start_time_epoch", false},
	{dynamodb.TableWorkflowExec, "name-shard-index", dynamodb.AttrNameShard, "start_time_epoch", false},
	{dynamodb.TableWorkflowExec, "state-index (legacy, for comparison)", "state", "start_time_epoch", false},
	{dynamodb.TableWorkflowExec, "name-index (legacy, for comparison)", "workflow_name", "start_time_epoch", false},
	{dynamodb.TableActivityDependency, "workflow-index", "workflow_exec_id", "", false},
	{dynamodb.TableActivityDependency, "dependent-index", "dependent_activity_exec_id", "", false},
}

// keyCounter is a dynamodb.API that counts, for every write that lands,
// the writes each index takes on each hash key value. It keeps the index
// keys of every item written through it, so it knows what a write moved.
type keyCounter struct {
	dynamodb.API
	prefix string
	mu     sync.Mutex
	items  map[string]map[string]types.AttributeValue // table/key → last image
	writes map[string]map[string]int                  // index → hash key value → writes
}

func (k *keyCounter) PutItem(ctx context.Context, in *awsdynamodb.PutItemInput, opts ...func(*awsdynamodb.Options)) (*awsdynamodb.PutItemOutput, error) {
	out, err := k.API.PutItem(ctx, in, opts...)
	if err == nil {
		k.landed(*in.TableName, in.Item)
	}
	return out, err
}

func (k *keyCounter) UpdateItem(ctx context.Context, in *awsdynamodb.UpdateItemInput, opts ...func(*awsdynamodb.Options)) (*awsdynamodb.UpdateItemOutput, error) {
	asked := in.ReturnValues
	in.ReturnValues = types.ReturnValueAllNew // the new image, to see what moved
	out, err := k.API.UpdateItem(ctx, in, opts...)
	in.ReturnValues = asked
	if err == nil {
		k.landed(*in.TableName, out.Attributes)
		if asked != types.ReturnValueAllNew {
			out.Attributes = nil
		}
	}
	return out, err
}

func str(v types.AttributeValue) string {
	switch v := v.(type) {
	case *types.AttributeValueMemberS:
		return v.Value
	case *types.AttributeValueMemberN:
		return v.Value
	}
	return ""
}

func (k *keyCounter) landed(table string, img map[string]types.AttributeValue) {
	base := strings.TrimPrefix(table, k.prefix)
	var id []string
	for _, a := range []string{"activity_exec_id", "workflow_exec_id", "activity_exec_dependency", "workflow_request_id", "workflow_name"} {
		id = append(id, str(img[a]))
	}
	key := base + "/" + strings.Join(id, "/")
	k.mu.Lock()
	defer k.mu.Unlock()
	old := k.items[key]
	k.items[key] = img
	for _, ix := range trackedIndexes {
		if ix.table != base {
			continue
		}
		in := func(m map[string]types.AttributeValue) (string, bool) {
			if m == nil || str(m[ix.hash]) == "" || (ix.rng != "" && str(m[ix.rng]) == "") {
				return "", false
			}
			return str(m[ix.hash]), true
		}
		oh, wasIn := in(old)
		nh, isIn := in(img)
		moved := wasIn != isIn || oh != nh || (ix.rng != "" && str(old[ix.rng]) != str(img[ix.rng]))
		w := k.writes[ix.name+" ("+ix.table+")"]
		if w == nil {
			w = map[string]int{}
			k.writes[ix.name+" ("+ix.table+")"] = w
		}
		switch {
		case moved:
			if wasIn {
				w[oh]++
			}
			if isIn {
				w[nh]++
			}
		case isIn && !ix.keysOnly:
			w[nh]++ // a projected attribute may have changed
		}
	}
}

type hotIndex struct {
	name          string
	keys, writes  int
	hottest       string
	hottestWrites int
}

type hotReport struct {
	lives   int
	took    time.Duration
	indexes []hotIndex
	sim     []simulated
}

// simulated is one second at 10,000 activities a second (5,000 workflows
// of 2, all of one name), computed with the store's shard function on
// fresh IDs instead of measured. Activity state index: every activity
// enters and leaves REQUESTED, READY, QUEUED and RUNNING once, two index
// writes on each of those keys. Workflow indexes: every workflow puts the
// index writes measured per workflow on its shard, and for the state
// index all of them on the shard of one state (an upper bound: they are
// spread over REQUESTED, RUNNING and the settled state).
type simulated struct {
	index         string
	keys, writes  int
	hottest       string
	hottestWrites int
}

func simulateSecond(lives int, perWorkflow map[string]int) []simulated {
	act, wfState, wfName := map[string]int{}, map[string]int{}, map[string]int{}
	for i := 0; i < lives; i += 2 {
		wf := state.WorkflowExecIDForRequest("bench", state.NewWorkflowRequestID("bench"))
		for _, name := range []string{"a", "b"} {
			id := state.ActivityExecIDFor(wf, name)
			for _, s := range []state.ActivityState{state.Requested, state.Ready, state.Queued, state.Running} {
				act[dynamodb.StateShard(id, s)] += 2
			}
		}
		ss, ns := dynamodb.WorkflowShards(wf, "bench", state.WorkflowRunning)
		wfState[ss] += perWorkflow["state-shard-index (workflow_exec)"]
		wfName[ns] += perWorkflow["name-shard-index (workflow_exec)"]
	}
	var out []simulated
	for _, c := range []struct {
		index  string
		perKey map[string]int
	}{
		{"state-shard-index (activity_exec)", act},
		{"state-shard-index (workflow_exec)", wfState},
		{"name-shard-index (workflow_exec)", wfName},
	} {
		r := simulated{index: c.index, keys: len(c.perKey)}
		for k, n := range c.perKey {
			r.writes += n
			if n > r.hottestWrites || (n == r.hottestWrites && k < r.hottest) {
				r.hottest, r.hottestWrites = k, n
			}
		}
		out = append(out, r)
	}
	return out
}

// measureHotKeys walks lives activities (workflows of 2: a, and b after
// a) through start, launch, claim, finish and advance on DynamoDB Local,
// 8 workflows at a time, and counts the index writes on each key.
func measureHotKeys(ctx context.Context, endpoint string, lives int) (hotReport, error) {
	prefix := "bench_" + uuid.NewString()[:8] + "_"
	kc := &keyCounter{API: client(endpoint), prefix: prefix, items: map[string]map[string]types.AttributeValue{}, writes: map[string]map[string]int{}}
	st := dynamodb.New(kc, dynamodb.Options{Prefix: prefix})
	if _, err := st.Install(ctx, false); err != nil {
		return hotReport{}, err
	}
	d, err := definition.Parse("bench.yaml", []byte("name: bench\nactivities:\n  a: {command: [\"true\"]}\n  b: {command: [\"true\"], depends_on: [a]}\n"))
	if err != nil {
		return hotReport{}, err
	}
	kc.writes = map[string]map[string]int{} // the install's writes are not a life's
	start := time.Now()
	jobs := make(chan int)
	errs := make(chan error, 8)
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range jobs {
				if err := walkWorkflow(ctx, st, d); err != nil {
					select {
					case errs <- err:
					default:
					}
					return
				}
			}
		}()
	}
	for i := 0; i < lives/2; i++ {
		select {
		case jobs <- i:
		case err := <-errs:
			close(jobs)
			wg.Wait()
			return hotReport{}, err
		}
	}
	close(jobs)
	wg.Wait()
	select {
	case err := <-errs:
		return hotReport{}, err
	default:
	}
	r := hotReport{lives: lives / 2 * 2, took: time.Since(start)}
	perWorkflow := map[string]int{}
	for name, w := range kc.writes {
		hi := hotIndex{name: name, keys: len(w)}
		for key, n := range w {
			hi.writes += n
			if n > hi.hottestWrites || (n == hi.hottestWrites && key < hi.hottest) {
				hi.hottest, hi.hottestWrites = key, n
			}
		}
		r.indexes = append(r.indexes, hi)
		perWorkflow[name] = (hi.writes + r.lives/2 - 1) / (r.lives / 2) // rounded up
	}
	r.sim = simulateSecond(10000, perWorkflow)
	sort.Slice(r.indexes, func(i, j int) bool { return r.indexes[i].name < r.indexes[j].name })
	return r, nil
}

// walkWorkflow starts one workflow of 2 and walks both activities through
// their lives as launcher and wrapper do.
func walkWorkflow(ctx context.Context, st *dynamodb.Store, d *definition.Workflow) error {
	id, _, err := workflow.Start(ctx, st, d, workflow.StartOptions{})
	if err != nil {
		return err
	}
	for _, name := range []string{"a", "b"} {
		k := state.ActivityKey{ActivityExecID: state.ActivityExecIDFor(id, name), WorkflowExecID: id}
		owner := uuid.NewString()
		for _, c := range []state.ActivityChange{
			{From: []state.ActivityState{state.Ready}, To: state.Queued, Hold: "launcher:x"},
			{From: state.ActivityStates, LaunchedAs: "pid:12345"},
			{From: []state.ActivityState{state.Queued}, To: state.Running, Claim: &state.Claim{Owner: owner, Host: "h", PID: 1, HeartbeatEnabled: true}},
		} {
			if _, err := st.UpdateActivity(ctx, k, c); err != nil {
				return err
			}
		}
		done, err := st.UpdateActivity(ctx, k, state.ActivityChange{From: []state.ActivityState{state.Running}, To: state.Completed, Owner: owner, Exit: &state.Exit{Code: 0}})
		if err != nil {
			return err
		}
		if _, err := workflow.Advance(ctx, st, done, nil); err != nil {
			return err
		}
	}
	return nil
}

func writeHotKeys(b *strings.Builder, r hotReport) {
	const rate = 10000.0
	fmt.Fprintf(b, "## The hottest index key at 10,000 activities/s\n\n")
	fmt.Fprintf(b, "DynamoDB caps one partition key at 1,000 write units a second. %d activity lives (workflows of 2: a, then b) walked through start, launch, claim, finish and advance on DynamoDB Local in %s, with a counter in front of the client that counts each index write by the hash key it lands on (an item entering, leaving or moving in an index; for an index that projects more than keys, any write to an item in it). Scaled to 10,000 activities a second (`scripts/dynamodb-local run -- go run ./tools/benchreport -cost`):\n\n",
		r.lives, r.took.Round(time.Second))
	fmt.Fprintf(b, "| index | keys written | index writes per activity | hottest key | its share of the index's writes | its writes/s at 10,000 activities/s |\n| --- | ---: | ---: | --- | ---: | ---: |\n")
	for _, ix := range r.indexes {
		if ix.writes == 0 {
			continue
		}
		hot := ix.hottest
		if len(hot) > 24 {
			hot = "a workflow's ID"
		}
		perSec := float64(ix.hottestWrites) / float64(r.lives) * rate
		mark := ""
		if perSec > 1000 {
			mark = " **(hot)**"
		}
		fmt.Fprintf(b, "| %s | %d | %.2f | `%s` | %.1f%% | %.0f%s |\n", ix.name, ix.keys, float64(ix.writes)/float64(r.lives), hot,
			100*float64(ix.hottestWrites)/float64(ix.writes), perSec, mark)
	}
	fmt.Fprintf(b, "\nThe sample above overstates the hottest shard (%d lives spread over %d keys of each state or name). Simulated over one second of 10,000 activity lives, 5,000 workflows of 2 all named `bench`, with the store's shard function on fresh IDs: each activity enters and leaves REQUESTED, READY, QUEUED and RUNNING once; each workflow puts the index writes measured per workflow above (rounded up) on its shard, on the state index all of them on one state's (an upper bound):\n\n",
		r.lives, dynamodb.StateShards)
	fmt.Fprintf(b, "| index | keys | index writes in that second | hottest key | its writes/s |\n| --- | ---: | ---: | --- | ---: |\n")
	for _, sm := range r.sim {
		mark := ""
		if sm.hottestWrites > 1000 {
			mark = " **(hot)**"
		}
		fmt.Fprintf(b, "| %s | %d | %d | `%s` | %d%s |\n", sm.index, sm.keys, sm.writes, sm.hottest, sm.hottestWrites, mark)
	}
	fmt.Fprintf(b, "\nThe legacy rows are the indexes before sharding, counted on the same writes: every READY activity of the fleet under one key, every workflow of one state or one name under one key.\n\n")

}
