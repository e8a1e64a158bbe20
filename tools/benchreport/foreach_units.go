package main

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awsdynamodb "github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/google/uuid"

	"github.com/whimbrel/whimbrel/definition"
	"github.com/whimbrel/whimbrel/state"
	"github.com/whimbrel/whimbrel/state/dynamodb"
	"github.com/whimbrel/whimbrel/workflow"
)

// --- the write units of a for_each element, beside a static dependent's

// The phases of a walk, in the order the report lists them.
const (
	phStart   = "start the workflow (request, workflow, items, RUNNING, ready the root)"
	phRoot    = "the root's life, and readying what waits on it (a map: open it, write its pages up to 1,000 elements ahead)"
	phLaunch  = "launch (read item and workflow, claim to QUEUED, record launched_as)"
	phClaim   = "claim (read workflow, QUEUED → RUNNING)"
	phFinish  = "finish (RUNNING → COMPLETED)"
	phAdvance = "advance (a map: count the element in its shard, step the account when due; static: resolve the edge, settle)"
	phPages   = "advance: write the next pages of elements (READY; none for a map of at most 1,000)"
)

var walkPhases = []string{phStart, phRoot, phLaunch, phClaim, phFinish, phAdvance, phPages}

// unitTally sums the capacity DynamoDB reports for each call, by phase,
// and counts the conditional writes it refused (DynamoDB charges one for
// each, at least a write unit, but reports no consumed capacity for it).
type unitTally struct {
	mu      sync.Mutex
	phase   string
	by      map[string]*phase
	refused int
}

func (t *unitTally) set(p string) {
	t.mu.Lock()
	t.phase = p
	t.mu.Unlock()
}

func (t *unitTally) add(write bool, putActivity bool, ccs ...types.ConsumedCapacity) {
	t.mu.Lock()
	defer t.mu.Unlock()
	name := t.phase
	if name == phAdvance && putActivity {
		name = phPages // an element created READY by the advance
	}
	p := t.by[name]
	if p == nil {
		p = &phase{name: name}
		t.by[name] = p
	}
	p.calls++
	for _, cc := range ccs {
		var ix float64
		for _, v := range cc.GlobalSecondaryIndexes {
			ix += aws.ToFloat64(v.CapacityUnits)
		}
		if write {
			p.write += aws.ToFloat64(cc.CapacityUnits)
			p.index += ix
		} else {
			p.read += aws.ToFloat64(cc.CapacityUnits)
		}
	}
}

func (t *unitTally) refuse() {
	t.mu.Lock()
	t.refused++
	t.mu.Unlock()
}

// unitAPI is the DynamoDB client with a tally in front: the store asks for
// the consumed capacity of every call (its Capacity option is set), and
// this reads it from each answer, telling reads from writes by the call.
type unitAPI struct {
	dynamodb.API
	t        *unitTally
	activity string // the activity table's name
}

func (u *unitAPI) GetItem(ctx context.Context, in *awsdynamodb.GetItemInput, opts ...func(*awsdynamodb.Options)) (*awsdynamodb.GetItemOutput, error) {
	out, err := u.API.GetItem(ctx, in, opts...)
	if err == nil && out.ConsumedCapacity != nil {
		u.t.add(false, false, *out.ConsumedCapacity)
	}
	return out, err
}

func (u *unitAPI) Query(ctx context.Context, in *awsdynamodb.QueryInput, opts ...func(*awsdynamodb.Options)) (*awsdynamodb.QueryOutput, error) {
	out, err := u.API.Query(ctx, in, opts...)
	if err == nil && out.ConsumedCapacity != nil {
		u.t.add(false, false, *out.ConsumedCapacity)
	}
	return out, err
}

func (u *unitAPI) BatchGetItem(ctx context.Context, in *awsdynamodb.BatchGetItemInput, opts ...func(*awsdynamodb.Options)) (*awsdynamodb.BatchGetItemOutput, error) {
	out, err := u.API.BatchGetItem(ctx, in, opts...)
	if err == nil {
		u.t.add(false, false, out.ConsumedCapacity...)
	}
	return out, err
}

func (u *unitAPI) PutItem(ctx context.Context, in *awsdynamodb.PutItemInput, opts ...func(*awsdynamodb.Options)) (*awsdynamodb.PutItemOutput, error) {
	out, err := u.API.PutItem(ctx, in, opts...)
	switch {
	case err == nil && out.ConsumedCapacity != nil:
		u.t.add(true, aws.ToString(in.TableName) == u.activity, *out.ConsumedCapacity)
	case errConflict(err):
		u.t.refuse()
	}
	return out, err
}

func (u *unitAPI) UpdateItem(ctx context.Context, in *awsdynamodb.UpdateItemInput, opts ...func(*awsdynamodb.Options)) (*awsdynamodb.UpdateItemOutput, error) {
	out, err := u.API.UpdateItem(ctx, in, opts...)
	switch {
	case err == nil && out.ConsumedCapacity != nil:
		u.t.add(true, false, *out.ConsumedCapacity)
	case errConflict(err):
		u.t.refuse()
	}
	return out, err
}

func (u *unitAPI) TransactWriteItems(ctx context.Context, in *awsdynamodb.TransactWriteItemsInput, opts ...func(*awsdynamodb.Options)) (*awsdynamodb.TransactWriteItemsOutput, error) {
	out, err := u.API.TransactWriteItems(ctx, in, opts...)
	switch {
	case err == nil:
		u.t.add(true, false, out.ConsumedCapacity...)
	case errConflict(err):
		u.t.refuse()
	}
	return out, err
}

// walkReport is what one walk of a workflow cost, in all.
type walkReport struct {
	n       int              // elements or dependents walked
	phases  map[string]phase // by name
	refused int
	took    time.Duration
}

func (w walkReport) writes() float64 {
	var s float64
	for _, p := range w.phases {
		s += p.write
	}
	return s
}

func (w walkReport) reads() float64 {
	var s float64
	for _, p := range w.phases {
		s += p.read
	}
	return s
}

type elementReport struct {
	n                 int
	alone             bool       // measured by -foreach-units, not with -foreach's sections
	mapSeq, staticSeq walkReport // one element at a time
	mapPar, staticPar walkReport // walkWorkers at once
}

// walkWorkers is how many launcher-and-wrapper walks run at once in the
// walk with contention.
const walkWorkers = 8

// measureElementUnits walks a workflow of a root and a for_each map of n
// elements, and one of a root and n static dependents, through DynamoDB
// Local with the store's own calls as launcher and wrapper make them:
// once one item at a time (every phase on its own), and once with
// walkWorkers at a time, as a fleet would, where the advances of
// elements that end together contend for the map's account.
func measureElementUnits(ctx context.Context, endpoint string, n int) (elementReport, error) {
	r := elementReport{n: n}
	var err error
	for _, w := range []struct {
		out     *walkReport
		isMap   bool
		workers int
	}{{&r.mapSeq, true, 1}, {&r.staticSeq, false, 1}, {&r.mapPar, true, walkWorkers}, {&r.staticPar, false, walkWorkers}} {
		if *w.out, err = walk(ctx, endpoint, n, w.isMap, w.workers); err != nil {
			return r, err
		}
	}
	return r, nil
}

// walk starts one workflow (a root, then a map of n elements or n static
// dependents) on fresh tables and takes every item through launch, claim,
// finish and advance, as whimbrel-launcher and whimbrel-run do.
func walk(ctx context.Context, endpoint string, n int, isMap bool, workers int) (walkReport, error) {
	res := walkReport{n: n}
	prefix := newPrefix("fe")
	t := &unitTally{by: map[string]*phase{}}
	api := &unitAPI{API: client(endpoint), t: t, activity: prefix + dynamodb.TableActivityExec}
	st := dynamodb.New(api, dynamodb.Options{Prefix: prefix, Capacity: func(dynamodb.Capacity) {}})
	if _, err := st.Install(ctx, false); err != nil {
		return res, err
	}
	var def strings.Builder
	def.WriteString("name: units\nactivities:\n  root: {command: [\"true\"]}\n")
	if isMap {
		fmt.Fprintf(&def, "  m: {depends_on: [root], for_each: {count: %d}, max_items: %d, command: [\"true\"]}\n", n, max(n, 1))
	} else {
		for i := 0; i < n; i++ {
			fmt.Fprintf(&def, "  d%04d: {depends_on: [root], command: [\"true\"]}\n", i)
		}
	}
	d, err := definition.Parse("units.yaml", []byte(def.String()))
	if err != nil {
		return res, err
	}
	began := time.Now()
	t.refused = 0
	t.set(phStart)
	id, _, err := workflow.Start(ctx, st, d, workflow.StartOptions{})
	if err != nil {
		return res, err
	}
	t.set(phRoot)
	if err := lifeOf(ctx, st, t, state.ActivityKey{ActivityExecID: state.ActivityExecIDFor(id, "root"), WorkflowExecID: id}, false); err != nil {
		return res, fmt.Errorf("the root: %w", err)
	}
	key := func(i int) state.ActivityKey {
		if isMap {
			return state.ActivityKey{ActivityExecID: state.ItemExecIDFor(id, "m", i), WorkflowExecID: id}
		}
		return state.ActivityKey{ActivityExecID: state.ActivityExecIDFor(id, fmt.Sprintf("d%04d", i)), WorkflowExecID: id}
	}
	var next atomic.Int64
	errs := make(chan error, workers)
	var wg sync.WaitGroup
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1)) - 1
				if i >= n {
					return
				}
				if err := lifeOf(ctx, st, t, key(i), workers == 1); err != nil {
					errs <- fmt.Errorf("item %d: %w", i, err)
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	if err := <-errs; err != nil {
		return res, err
	}
	wf, err := st.GetWorkflow(ctx, id)
	if err != nil {
		return res, err
	}
	if wf.State != state.WorkflowCompleted {
		return res, fmt.Errorf("the workflow is %s after every item completed, not COMPLETED", wf.State)
	}
	res.took = time.Since(began)
	res.phases = map[string]phase{}
	t.mu.Lock()
	for name, p := range t.by {
		res.phases[name] = *p
	}
	res.refused = t.refused
	t.mu.Unlock()
	return res, nil
}

// lifeOf takes one READY item through its launch, claim, finish and
// advance with the store's calls. With phases it marks each step in the
// tally (the walk is one item at a time); an item not written or not
// READY yet (the page that holds it is still being written by another
// walker) is waited for.
func lifeOf(ctx context.Context, st *dynamodb.Store, t *unitTally, k state.ActivityKey, phases bool) error {
	mark := func(p string) {
		if phases {
			t.set(p)
		}
	}
	mark(phLaunch)
	deadline := time.Now().Add(2 * time.Minute)
	for {
		a, err := st.GetActivity(ctx, k)
		if err == nil && a.State == state.Ready {
			break
		}
		if err != nil && !errors.Is(err, state.ErrNotFound) {
			return err
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("not READY within 2 minutes (%v)", err)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if _, err := st.GetWorkflow(ctx, k.WorkflowExecID); err != nil {
		return err
	}
	if _, err := st.UpdateActivity(ctx, k, state.ActivityChange{From: []state.ActivityState{state.Ready}, To: state.Queued, Hold: "launcher:bench"}); err != nil {
		return err
	}
	if _, err := st.UpdateActivity(ctx, k, state.ActivityChange{From: state.ActivityStates, LaunchedAs: "pid:12345"}); err != nil {
		return err
	}
	mark(phClaim)
	wf, err := st.GetWorkflow(ctx, k.WorkflowExecID)
	if err != nil {
		return err
	}
	owner := uuid.NewString()
	if _, err := st.UpdateActivity(ctx, k, state.ActivityChange{From: []state.ActivityState{state.Queued}, To: state.Running,
		Claim: &state.Claim{Owner: owner, Host: "ip-10-0-0-1", PID: 1, HeartbeatEnabled: true, HeartbeatInterval: 30 * time.Second, HeartbeatTimeout: 2 * time.Minute}}); err != nil {
		return err
	}
	mark(phFinish)
	done, err := st.UpdateActivity(ctx, k, state.ActivityChange{From: []state.ActivityState{state.Running}, To: state.Completed, Owner: owner,
		Exit: &state.Exit{Code: 0}, Reason: "exit status 0"})
	if err != nil {
		return err
	}
	mark(phAdvance)
	if _, err := workflow.AdvanceKnown(ctx, st, wf, done, nil); err != nil {
		return err
	}
	return nil
}

func writeElementUnits(b *strings.Builder, r elementReport) {
	fmt.Fprintf(b, "## Write units of a for_each element\n\n")
	when := "in the same run as the section above"
	if r.alone {
		when = "measured alone (`scripts/dynamodb-local run -- go run ./tools/benchreport -foreach-units`)"
	}
	fmt.Fprintf(b, "From `ReturnConsumedCapacity` on DynamoDB Local (what DynamoDB charges), read from every answer by a counter in front of the client, %s. Two workflows on fresh tables: a root and a for_each map of %d elements (`for_each: {count: %d}`), and a root and %d static dependents; each item taken through launch, claim, finish and advance with the store's own calls, as whimbrel-launcher and whimbrel-run make them (the wrapper advances from the workflow item it read at its claim). First one item at a time, per step (a static dependent's start is its share of the workflow's start):\n\n", when, r.n, r.n, r.n)
	fmt.Fprintf(b, "| step, per element or dependent | map: write units | of them on indexes | read units | static: write units | of them on indexes | read units |\n| --- | ---: | ---: | ---: | ---: | ---: | ---: |\n")
	per := func(w walkReport, name string) phase {
		p := w.phases[name]
		n := float64(max(w.n, 1))
		return phase{write: p.write / n, index: p.index / n, read: p.read / n}
	}
	for _, name := range walkPhases {
		m, s := per(r.mapSeq, name), per(r.staticSeq, name)
		fmt.Fprintf(b, "| %s | %.2f | %.2f | %.2f | %.2f | %.2f | %.2f |\n", name, m.write, m.index, m.read, s.write, s.index, s.read)
	}
	n := float64(max(r.n, 1))
	fmt.Fprintf(b, "| **in all, per element or dependent** | **%.2f** | | %.2f | **%.2f** | | %.2f |\n\n", r.mapSeq.writes()/n, r.mapSeq.reads()/n, r.staticSeq.writes()/n, r.staticSeq.reads()/n)
	fmt.Fprintf(b, "Then %d items at a time, as a fleet of launchers and wrappers would take them (the advances of elements that end together contend for their shards of the map's count, and now and then for the map's account, and a loser reads it again and retries; a refused conditional write is charged at least a write unit by DynamoDB, but reports no consumed capacity, so it is counted apart):\n\n", walkWorkers)
	fmt.Fprintf(b, "| workflow | write units per item | refused conditional writes per item | read units per item (with the walkers' polls for READY) | took |\n| --- | ---: | ---: | ---: | ---: |\n")
	for _, x := range []struct {
		name string
		w    walkReport
	}{{"root and map", r.mapPar}, {"root and static dependents", r.staticPar}} {
		fmt.Fprintf(b, "| %s of %d | %.2f | %.2f | %.2f | %s |\n", x.name, r.n, x.w.writes()/n, float64(x.w.refused)/n, x.w.reads()/n, x.w.took.Round(100*time.Millisecond))
	}
	fmt.Fprintln(b)
}
