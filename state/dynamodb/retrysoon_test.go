package dynamodb_test

import (
	"context"
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awsdynamodb "github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/whimbrel/whimbrel/internal/dynamotest"
	"github.com/whimbrel/whimbrel/state"
	"github.com/whimbrel/whimbrel/state/dynamodb"
)

// TestDueRetriesListOnlyWhatIsDue: retries parked with a short delay go
// under the SOON shard of their not_before's second, those parked for a
// minute or more under a WAIT shard. A window's listing holds the retries
// of its second and those an earlier round left under the same key, and
// not one of a later round under that key (created later, due a round
// later), nor one not parked. Put back, a retry leaves the listing.
func TestDueRetriesListOnlyWhatIsDue(t *testing.T) {
	t.Parallel()
	client, prefix := dynamotest.Client(t), dynamotest.Prefix(t)
	st := dynamodb.New(client, dynamodb.Options{Prefix: prefix, CallTimeout: dynamotest.CallTimeout})
	ctx := context.Background()
	if _, err := st.Install(ctx, false); err != nil {
		t.Fatal(err)
	}
	end := state.WindowEnd(time.Now()) // the window [end-1s, end) has ended
	wf := "w::00000000-0000-4000-8000-000000000000"
	mk := func(n int, at, due time.Time) state.ActivityKey {
		k := state.ActivityKey{ActivityExecID: fmt.Sprintf("a::00000000-0000-4000-8000-%012d", n), WorkflowExecID: wf}
		a := &state.ActivityExec{ActivityKey: k, WorkflowName: "w", ActivityName: "a", State: state.Ready, Attempt: 2, StateTime: at, NotBefore: due}
		if err := st.CreateActivity(ctx, a); err != nil {
			t.Fatal(err)
		}
		return k
	}
	round := time.Duration(st.RetryCycle()) * state.RetryWindow
	due := mk(1, end.Add(-20*time.Second), end.Add(-500*time.Millisecond)) // due in the window
	// Left a round before by a client that writes the contract's
	// attributes itself, in whole seconds.
	leftOver := state.ActivityKey{ActivityExecID: "a::00000000-0000-4000-8000-000000000002", WorkflowExecID: wf}
	left := end.Add(-round - time.Second)
	_, err := client.PutItem(ctx, &awsdynamodb.PutItemInput{TableName: aws.String(prefix + dynamodb.TableActivityExec), Item: map[string]types.AttributeValue{
		"activity_exec_id": toAV(t, leftOver.ActivityExecID), "workflow_exec_id": toAV(t, wf), "workflow_name": toAV(t, "w"),
		"activity_name": toAV(t, "a"), "state": toAV(t, "READY"), "state_time_epoch": toAV(t, int(left.Unix())-30),
		"not_before": toAV(t, int(left.Unix())), "retry_wait": toAV(t, int(left.Unix())), "attempt": toAV(t, 2),
		dynamodb.AttrStateShard: toAV(t, "SOON#"+strconv.Itoa(int(left.Unix()%64))+"#"+strconv.Itoa(int(fnv32(leftOver.ActivityExecID)%32))),
	}})
	if err != nil {
		t.Fatal(err)
	}
	nextRound := mk(3, end.Add(round-50*time.Second), end.Add(round-500*time.Millisecond))  // same key, a round later
	notParked := mk(4, end.Add(-3*time.Second), end.Add(-time.Second-500*time.Millisecond)) // a delay under 5 s
	long := mk(5, end.Add(-2*time.Minute), end.Add(-500*time.Millisecond))                  // a delay of 2 minutes
	a, err := st.GetActivity(ctx, due)
	if err != nil || a.State != state.Ready {
		t.Fatalf("%+v %v", a, err)
	}
	for k, want := range map[state.ActivityKey]string{due: dynamodb.SoonShard(due.ActivityExecID, end.Add(-500*time.Millisecond)),
		nextRound: dynamodb.SoonShard(nextRound.ActivityExecID, end.Add(-500*time.Millisecond)), long: dynamodb.WaitShard(long.ActivityExecID),
		notParked: dynamodb.StateShard(notParked.ActivityExecID, state.Ready)} {
		if got := shardOf(t, client, prefix+dynamodb.TableActivityExec, activityKeyAV(t, k)); got != want {
			t.Errorf("%s is under %q, want %q", k.ActivityExecID, got, want)
		}
	}
	refs, err := st.DueRetries(ctx, end, 100)
	if err != nil {
		t.Fatal(err)
	}
	got := map[state.ActivityKey]bool{}
	for _, r := range refs {
		got[r.ActivityKey] = true
	}
	if !got[due] || !got[leftOver] || got[nextRound] || got[notParked] || got[long] || len(got) != 2 {
		t.Fatalf("the window's listing holds %v; want the retry due in it and the one left a round before", refs)
	}
	if err := st.UnparkRetry(ctx, due); err != nil {
		t.Fatal(err)
	}
	if got := shardOf(t, client, prefix+dynamodb.TableActivityExec, activityKeyAV(t, due)); got != dynamodb.StateShard(due.ActivityExecID, state.Ready) {
		t.Fatalf("put back, the retry is under %q", got)
	}
	if refs, err := st.DueRetries(ctx, end, 100); err != nil || len(refs) != 1 || refs[0].ActivityKey != leftOver {
		t.Fatalf("after the put back the listing holds %v (%v)", refs, err)
	}
}

// fnv32 is the 32-bit FNV-1a hash of s, as docs/contract.md#sharded-indexes states it.
func fnv32(s string) uint32 {
	h := uint32(2166136261)
	for _, c := range []byte(s) {
		h ^= uint32(c)
		h *= 16777619
	}
	return h
}
