package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"slices"
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
	onlyMapHot = flag.Bool("map-hot", false, "measure the writes and reads on each item key of a for_each map's life only, and print its section")
	mapHotSize = flag.Int("map-hot-elements", 2000, "elements of the map whose item keys -map-hot counts")
	mapHotW    = flag.Int("map-hot-wrappers", 32, "elements -map-hot runs at once")
	onlyUnits  = flag.Bool("foreach-units", false, "measure a for_each element's write units on DynamoDB Local only (as -foreach does after its maps), and print their section")
)

// printElementUnits measures and prints the write units of a for_each
// element alone.
func printElementUnits(ctx context.Context, w *strings.Builder, endpoint string) error {
	r, err := measureElementUnits(ctx, endpoint, *elementUnits)
	if err != nil {
		return fmt.Errorf("write units of an element: %w", err)
	}
	r.alone = true
	writeElementUnits(w, r)
	return nil
}

// itemCounter is a dynamodb.API that counts, on each item key, the write
// requests that landed, those refused by their condition (DynamoDB
// charges those too, and they count against the key's 1,000 writes a
// second), and the strongly consistent reads.
type itemCounter struct {
	dynamodb.API
	mu                     sync.Mutex
	landed, refused, reads map[string]int
	keyOf                  func(table string, key map[string]types.AttributeValue) string
}

func newItemCounter(api dynamodb.API, prefix string) *itemCounter {
	return &itemCounter{API: api, landed: map[string]int{}, refused: map[string]int{}, reads: map[string]int{},
		keyOf: func(table string, key map[string]types.AttributeValue) string {
			var id []string
			for _, a := range []string{"activity_exec_id", "workflow_exec_id", "activity_exec_dependency", "workflow_request_id", "workflow_name"} {
				if s := str(key[a]); s != "" {
					id = append(id, s)
				}
			}
			return strings.TrimPrefix(table, prefix) + "/" + strings.Join(id, "/")
		}}
}

func (c *itemCounter) count(m map[string]int, table string, key map[string]types.AttributeValue) {
	c.mu.Lock()
	m[c.keyOf(table, key)]++
	c.mu.Unlock()
}

func (c *itemCounter) wrote(table string, key map[string]types.AttributeValue, err error) {
	var ccf *types.ConditionalCheckFailedException
	switch {
	case err == nil:
		c.count(c.landed, table, key)
	case errors.As(err, &ccf):
		c.count(c.refused, table, key)
	}
}

func (c *itemCounter) GetItem(ctx context.Context, in *awsdynamodb.GetItemInput, opts ...func(*awsdynamodb.Options)) (*awsdynamodb.GetItemOutput, error) {
	out, err := c.API.GetItem(ctx, in, opts...)
	if err == nil {
		c.count(c.reads, *in.TableName, in.Key)
	}
	return out, err
}

func (c *itemCounter) PutItem(ctx context.Context, in *awsdynamodb.PutItemInput, opts ...func(*awsdynamodb.Options)) (*awsdynamodb.PutItemOutput, error) {
	out, err := c.API.PutItem(ctx, in, opts...)
	c.wrote(*in.TableName, in.Item, err)
	return out, err
}

func (c *itemCounter) UpdateItem(ctx context.Context, in *awsdynamodb.UpdateItemInput, opts ...func(*awsdynamodb.Options)) (*awsdynamodb.UpdateItemOutput, error) {
	out, err := c.API.UpdateItem(ctx, in, opts...)
	c.wrote(*in.TableName, in.Key, err)
	return out, err
}

func (c *itemCounter) TransactWriteItems(ctx context.Context, in *awsdynamodb.TransactWriteItemsInput, opts ...func(*awsdynamodb.Options)) (*awsdynamodb.TransactWriteItemsOutput, error) {
	out, err := c.API.TransactWriteItems(ctx, in, opts...)
	for _, it := range in.TransactItems {
		switch {
		case it.Put != nil:
			c.wrote(*it.Put.TableName, it.Put.Item, err)
		case it.Update != nil:
			c.wrote(*it.Update.TableName, it.Update.Key, err)
		case it.Delete != nil:
			c.wrote(*it.Delete.TableName, it.Delete.Key, err)
		}
	}
	return out, err
}

// mapHot is what one map's life put on its hottest item keys.
type mapHot struct {
	elements, wrappers int
	took               time.Duration
	// rows are the map's own item, then the hottest other keys by writes
	// (landed and refused) and by reads.
	rows []keyLoad
}

// keyLoad is what one item key took: writes landed and refused, and
// strongly consistent reads.
type keyLoad struct {
	what                   string
	landed, refused, reads int
}

// measureMapHot runs a for_each map of n elements of `true` on DynamoDB
// Local, w elements at a time, each walked as a launcher and its wrapper
// walk it (queue, claim, record COMPLETED, advance: the advance steps the
// map), and counts the requests on each item key.
func measureMapHot(ctx context.Context, endpoint string, n, w int) (mapHot, error) {
	prefix := "maphot_" + uuid.NewString()[:8] + "_"
	ic := newItemCounter(client(endpoint), prefix)
	st := dynamodb.New(ic, dynamodb.Options{Prefix: prefix})
	if _, err := st.Install(ctx, false); err != nil {
		return mapHot{}, err
	}
	d, err := definition.Parse("maphot.yaml", []byte(fmt.Sprintf("name: maphot\nactivities:\n  each: {for_each: {count: %d}, command: [\"true\"]}\n  join: {depends_on: [each], command: [\"true\"]}\n", n)))
	if err != nil {
		return mapHot{}, err
	}
	ic.mu.Lock()
	ic.landed, ic.refused, ic.reads = map[string]int{}, map[string]int{}, map[string]int{} // the install's are not the map's
	ic.mu.Unlock()
	start := time.Now()
	id, _, err := workflow.Start(ctx, st, d, workflow.StartOptions{})
	if err != nil {
		return mapHot{}, err
	}
	jobs := make(chan int)
	errs := make(chan error, w)
	var wg sync.WaitGroup
	for range w {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range jobs {
				if err := walkElement(ctx, st, id, i); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
feed:
	for i := 0; i < n; i++ {
		select {
		case jobs <- i:
		case err = <-errs:
			break feed
		}
	}
	close(jobs)
	wg.Wait()
	if err == nil {
		select {
		case err = <-errs:
		default:
		}
	}
	if err != nil {
		return mapHot{}, err
	}
	mk := state.ActivityKey{ActivityExecID: state.ActivityExecIDFor(id, "each"), WorkflowExecID: id}
	m, err := st.GetActivity(ctx, mk)
	if err != nil {
		return mapHot{}, err
	}
	if m.State != state.Completed {
		return mapHot{}, fmt.Errorf("the map ended %s: %s", m.State, m.Reason)
	}
	r := mapHot{elements: n, wrappers: w, took: time.Since(start)}
	ic.mu.Lock()
	defer ic.mu.Unlock()
	keyOf := func(activityExecID string) string {
		return ic.keyOf(prefix+dynamodb.TableActivityExec, map[string]types.AttributeValue{
			"activity_exec_id": &types.AttributeValueMemberS{Value: activityExecID}, "workflow_exec_id": &types.AttributeValueMemberS{Value: id}})
	}
	names := map[string]string{keyOf(mk.ActivityExecID): "the map's own item",
		ic.keyOf(prefix+dynamodb.TableWorkflowExec, map[string]types.AttributeValue{"workflow_exec_id": &types.AttributeValueMemberS{Value: id}, "workflow_name": &types.AttributeValueMemberS{Value: "maphot"}}): "the workflow's item (not the map's: read by each element's advance here, as by each wrapper at its claim)"}
	for k := range state.MapShards {
		names[keyOf(state.ItemExecIDFor(id, "each", k))] = fmt.Sprintf("shard %d (element %d's item)", k, k)
	}
	load := func(key string) keyLoad {
		what := names[key]
		if what == "" {
			what = "another key: " + key[:strings.IndexByte(key, '/')]
		}
		return keyLoad{what: what, landed: ic.landed[key], refused: ic.refused[key], reads: ic.reads[key]}
	}
	mapKey := keyOf(mk.ActivityExecID)
	r.rows = append(r.rows, load(mapKey))
	keys := map[string]bool{}
	for _, m := range []map[string]int{ic.landed, ic.refused, ic.reads} {
		for k := range m {
			keys[k] = k != mapKey
		}
	}
	var others []string
	for k, ok := range keys {
		if ok {
			others = append(others, k)
		}
	}
	sort.Strings(others)
	byWrites := slices.Clone(others)
	sort.SliceStable(byWrites, func(i, j int) bool {
		return ic.landed[byWrites[i]]+ic.refused[byWrites[i]] > ic.landed[byWrites[j]]+ic.refused[byWrites[j]]
	})
	shown := map[string]bool{}
	for _, k := range byWrites[:min(2, len(byWrites))] {
		r.rows, shown[k] = append(r.rows, load(k)), true
	}
	sort.SliceStable(others, func(i, j int) bool { return ic.reads[others[i]] > ic.reads[others[j]] })
	for _, k := range others[:min(1, len(others))] {
		if !shown[k] {
			r.rows = append(r.rows, load(k))
		}
	}
	return r, nil
}

// walkElement walks element i of the map through its life once it is
// written (a step writes it when the window reaches it).
func walkElement(ctx context.Context, st *dynamodb.Store, id string, i int) error {
	k := state.ActivityKey{ActivityExecID: state.ItemExecIDFor(id, "each", i), WorkflowExecID: id}
	for wait := time.Now().Add(time.Minute); ; {
		_, err := st.GetActivity(ctx, k)
		if err == nil {
			break
		}
		if !errors.Is(err, state.ErrNotFound) || time.Now().After(wait) {
			return fmt.Errorf("element %d: %w", i, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
	owner := uuid.NewString()
	for _, c := range []state.ActivityChange{
		{From: []state.ActivityState{state.Ready}, To: state.Queued, Hold: "launcher:x"},
		{From: []state.ActivityState{state.Queued}, To: state.Running, Claim: &state.Claim{Owner: owner, Host: "h", PID: 1, HeartbeatEnabled: true}},
	} {
		if _, err := st.UpdateActivity(ctx, k, c); err != nil {
			return fmt.Errorf("element %d: %w", i, err)
		}
	}
	done, err := st.UpdateActivity(ctx, k, state.ActivityChange{From: []state.ActivityState{state.Running}, To: state.Completed, Owner: owner, Exit: &state.Exit{Code: 0}})
	if err != nil {
		return fmt.Errorf("element %d: %w", i, err)
	}
	if _, err := workflow.Advance(ctx, st, done, nil); err != nil {
		return fmt.Errorf("element %d: advance: %w", i, err)
	}
	return nil
}

func writeMapHot(b *strings.Builder, r mapHot) {
	const rate = 10000.0
	per := func(n int) float64 { return float64(n) / float64(r.elements) }
	fmt.Fprintf(b, "## The hottest item key of a for_each map at 10,000 completions/s\n\n")
	fmt.Fprintf(b, "DynamoDB caps one item key at 1,000 write units and 3,000 read units a second. A map of %d elements of `true` (the default window: 1,000 elements written ahead of the oldest not final) walked on DynamoDB Local in %s, %d elements at a time, each as a launcher and its wrapper walk it (queue, claim, record COMPLETED, advance, which steps the map), with a counter in front of the client that counts each request by the item key it names: writes that landed, writes refused by their condition (charged, and counted against the key, as landed ones are), strongly consistent reads. Scaled to 10,000 element completions a second (`scripts/dynamodb-local run -- go run ./tools/benchreport -map-hot`):\n\n",
		r.elements, r.took.Round(time.Second), r.wrappers)
	fmt.Fprintf(b, "| item key | writes landed per completion | writes refused per completion | reads per completion | writes/s at 10,000 completions/s | reads/s at 10,000 completions/s |\n| --- | ---: | ---: | ---: | ---: | ---: |\n")
	mark := func(v, limit float64) string {
		if v > limit {
			return fmt.Sprintf("%.0f **(hot)**", v)
		}
		return fmt.Sprintf("%.0f", v)
	}
	for _, k := range r.rows {
		fmt.Fprintf(b, "| %s | %.3f | %.3f | %.3f | %s | %s |\n", k.what, per(k.landed), per(k.refused), per(k.reads),
			mark(per(k.landed+k.refused)*rate, 1000), mark(per(k.reads)*rate, 3000))
	}
	fmt.Fprintf(b, "\nThe rows are the map's own item, the two keys that took the most writes, and the key that took the most reads (docs/for-each.md, \"How it runs without a coordinator\"). Each element's wrapper counts its end in one of %d shards (element i in shard i mod %d, kept on element k's own item), a compare-and-set of that shard alone; the map's own item is read and written only by a step, which a count calls for when the elements final from the list's start pass a checkpoint (every quarter window, at most 250 elements), reach a missing element or the list's end, or when the failures may pass the tolerated count. A key is marked **(hot)** above DynamoDB's 1,000 writes or 3,000 reads a second. The workflow's item, when it shows, is read once per element for the definition (here by each advance; in a fleet by each element's wrapper at its claim, and by the launcher that launches it): a hot key of reads that sharding the map's count does not touch.\n\n", state.MapShards, state.MapShards)
}
