package main

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/whimbrel/whimbrel/definition"
	"github.com/whimbrel/whimbrel/monitor"
	"github.com/whimbrel/whimbrel/notify"
	"github.com/whimbrel/whimbrel/state"
	"github.com/whimbrel/whimbrel/state/dynamodb"
	"github.com/whimbrel/whimbrel/workflow"
)

// notifyCost is what a notification adds to a run, and what a monitor's
// sweep and deliverer pass cost over a history of delivered
// notifications.
type notifyCost struct {
	// The capacity units of a failed two-activity run (start, failure,
	// settle) without notify:, and with one webhook entry, its delivery
	// included.
	plain, notified phase
	delivery        phase
	// A sweep and a deliverer's pass over no notifications and over
	// history delivered ones.
	calls [2]int
	units [2]float64
	took  [2]time.Duration
}

// onlyNotify measures the notifications alone, printing their section.
var onlyNotify bool

func measureNotify(ctx context.Context, endpoint string, history int) (notifyCost, error) {
	var res notifyCost
	var c counter
	prefix := "notify_" + uuid.NewString()[:8] + "_"
	st := dynamodb.New(client(endpoint), dynamodb.Options{Prefix: prefix, Capacity: c.record})
	if _, err := st.Install(ctx, false); err != nil {
		return res, err
	}
	rcv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	defer rcv.Close()
	d := notify.New(st, notify.Config{})
	life := func(extra string) (phase, error) {
		def, err := definition.Parse("bench.yaml", []byte("name: bench\nactivities:\n  a: {command: [\"true\"]}\n  b: {command: [\"true\"], depends_on: [a]}\n"+extra))
		if err != nil {
			return phase{}, err
		}
		c.take("")
		id, _, err := workflow.Start(ctx, st, def, workflow.StartOptions{})
		if err != nil {
			return phase{}, err
		}
		k := state.ActivityKey{ActivityExecID: state.ActivityExecIDFor(id, "a"), WorkflowExecID: id}
		if _, err := st.UpdateActivity(ctx, k, state.ActivityChange{From: []state.ActivityState{state.Ready}, To: state.Running, Claim: &state.Claim{Owner: "o"}}); err != nil {
			return phase{}, err
		}
		a, err := st.UpdateActivity(ctx, k, state.ActivityChange{From: []state.ActivityState{state.Running}, To: state.Failed, Owner: "o", Exit: &state.Exit{Code: 1}})
		if err != nil {
			return phase{}, err
		}
		if _, err := workflow.Advance(ctx, st, a, nil); err != nil {
			return phase{}, err
		}
		return c.take(""), nil
	}
	var err error
	if res.plain, err = life(""); err != nil {
		return res, err
	}
	if res.notified, err = life("notify:\n  - on: [failed]\n    webhook: {url: \"" + rcv.URL + "\"}\n"); err != nil {
		return res, err
	}
	d.Once(ctx)
	res.delivery = c.take("")

	pass := func(i int) error {
		c.take("")
		began := time.Now()
		if _, err := monitor.New(st, monitor.Config{AdoptPages: -1}).Sweep(ctx); err != nil {
			return err
		}
		d.Once(ctx)
		res.took[i] = time.Since(began)
		p := c.take("")
		res.calls[i], res.units[i] = p.calls, p.read+p.write
		return nil
	}
	if err := pass(0); err != nil {
		return res, err
	}
	// The history: delivered notifications, as a long life of runs leaves
	// them (out of the due index).
	now := time.Now()
	for i := 0; i < history; i += 25 {
		var batch []*state.Notification
		id := state.NewWorkflowExecID("history")
		for j := i; j < min(i+25, history); j++ {
			batch = append(batch, &state.Notification{NotificationKey: state.NotificationKey{WorkflowExecID: id, ID: fmt.Sprintf("failed/%d", j-i)},
				WorkflowName: "history", State: state.NotificationDelivered, Event: "failed", Body: "{}", Created: now, Delivered: now, Version: 3})
		}
		if _, err := st.PutNotifications(ctx, batch); err != nil {
			return res, err
		}
	}
	c.take("")
	return res, pass(1)
}

func writeNotify(b *strings.Builder, n notifyCost, history int) {
	fmt.Fprintf(b, "## Notifications: the units one adds, and a sweep over delivered ones\n\n")
	fmt.Fprintf(b, "A failed two-activity run (start, the failure, the settle), without `notify:` and with one webhook entry ([notifications.md](docs/notifications.md)), and the delivery of its notification by a monitor's deliverer:\n\n")
	fmt.Fprintf(b, "| | store calls | write units | read units |\n| --- | ---: | ---: | ---: |\n")
	fmt.Fprintf(b, "| run without notify | %d | %.1f | %.1f |\n| run with notify | %d | %.1f | %.1f |\n| its delivery | %d | %.1f | %.1f |\n\n",
		n.plain.calls, n.plain.write, n.plain.read, n.notified.calls, n.notified.write, n.notified.read, n.delivery.calls, n.delivery.write, n.delivery.read)
	fmt.Fprintf(b, "A notification adds %.1f write units to the run (the watch written at its start, the delivery written at its end, the watch closed) and %.1f to deliver it (taken, then recorded), index writes included.\n\n",
		n.notified.write-n.plain.write, n.delivery.write)
	// DynamoDB Local reports no capacity for queries of an empty index:
	// the calls are then what the pass costs.
	ratio, of := n.units[1]/max(n.units[0], 0.5), "units"
	if n.units[0] == 0 && n.units[1] == 0 {
		ratio, of = float64(n.calls[1])/float64(max(n.calls[0], 1)), "store calls, the units being 0 both times"
	}
	fmt.Fprintf(b, "A monitor's sweep and its deliverer's pass over no notifications, then over %d delivered ones:\n\n| delivered notifications | store calls | capacity units | took |\n| ---: | ---: | ---: | ---: |\n", history)
	fmt.Fprintf(b, "| 0 | %d | %.1f | %s |\n| %d | %d | %.1f | %s |\n\n", n.calls[0], n.units[0], n.took[0].Round(time.Millisecond), history, n.calls[1], n.units[1], n.took[1].Round(time.Millisecond))
	fmt.Fprintf(b, "%.2f× the %s (target ≤ 1.1×): a sweep never reads the notification table, and a deliverer's pass reads only the sparse due index (%d Queries, one per shard), which a delivered notification leaves (`scripts/dynamodb-local run -- go run ./tools/benchreport -notify`).\n\n", ratio, of, state.NotificationShards)
}
