package main

import (
	"context"
	"fmt"
	"strings"

	"github.com/google/uuid"

	"github.com/whimbrel/whimbrel/definition"
	"github.com/whimbrel/whimbrel/state"
	"github.com/whimbrel/whimbrel/state/dynamodb"
	"github.com/whimbrel/whimbrel/workflow"
)

// measureRetry counts what one retry adds: an activity fails its first
// attempt, and the advance after it decides the retry (create the next
// attempt, link the failed one). The next attempt's own launch, claim and
// finish cost what any activity's do.
func measureRetry(ctx context.Context, endpoint string) ([]phase, error) {
	var c counter
	prefix := "bench_" + uuid.NewString()[:8] + "_"
	st := dynamodb.New(client(endpoint), dynamodb.Options{Prefix: prefix, Capacity: c.record})
	if _, err := st.Install(ctx, false); err != nil {
		return nil, err
	}
	d, err := definition.Parse("bench.yaml", []byte("name: bench\nactivities:\n  a: {command: [\"true\"], retry: {max_attempts: 2, interval: 1s}}\n  b: {command: [\"true\"], depends_on: [a]}\n"))
	if err != nil {
		return nil, err
	}
	id, _, err := workflow.Start(ctx, st, d, workflow.StartOptions{})
	if err != nil {
		return nil, err
	}
	k := state.ActivityKey{ActivityExecID: state.ActivityExecIDFor(id, "a"), WorkflowExecID: id}
	owner := uuid.NewString()
	for _, ch := range []state.ActivityChange{
		{From: []state.ActivityState{state.Ready}, To: state.Queued, Hold: "launcher:x"},
		{From: []state.ActivityState{state.Queued}, To: state.Running, Claim: &state.Claim{Owner: owner, Host: "ip-10-0-0-1", PID: 1}},
	} {
		if _, err := st.UpdateActivity(ctx, k, ch); err != nil {
			return nil, err
		}
	}
	failed, err := st.UpdateActivity(ctx, k, state.ActivityChange{From: []state.ActivityState{state.Running}, To: state.Failed, Owner: owner,
		Exit: &state.Exit{Code: 1}, Error: "a few lines of stderr\n", Reason: "exit status 1"})
	if err != nil {
		return nil, err
	}
	c.take("")
	res, err := workflow.Advance(ctx, st, failed, nil)
	if err != nil {
		return nil, err
	}
	if res.Retried == "" {
		return nil, fmt.Errorf("the failed attempt was not retried")
	}
	phases := []phase{c.take("advance after a failed attempt: decide the retry (read workflow, create attempt 2, link retried_by)")}

	// A replay of the same advance (a monitor's repair, a racing
	// participant) finds the retry made.
	if _, err := workflow.Advance(ctx, st, failed, nil); err != nil {
		return nil, err
	}
	phases = append(phases, c.take("the same advance repeated by another participant (the create is refused; the link is written again)"))
	return phases, nil
}

func writeRetry(b *strings.Builder, phases []phase) {
	fmt.Fprintf(b, "## Write units added by one retry\n\n")
	fmt.Fprintf(b, "An attempt that fails and is retried costs, beyond its own life, the retry's decision below; the next attempt then costs what any activity's life costs (table above). Measured with `ReturnConsumedCapacity`:\n\n")
	fmt.Fprintf(b, "| step | write units | of them on indexes | read units | calls |\n| --- | ---: | ---: | ---: | ---: |\n")
	for _, p := range phases {
		fmt.Fprintf(b, "| %s | %.1f | %.1f | %.1f | %d |\n", p.name, p.write, p.index, p.read, p.calls)
	}
	fmt.Fprintf(b, "\nThe attempt's item is put with its two index keys (state and workflow), hence 3 of the 4 units. A refused conditional write is charged 1 write unit by DynamoDB but returns no consumed capacity, so a repeated decision's refused create is not in its row.\n\n")
}
