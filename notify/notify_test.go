package notify_test

import (
	"os"
	"sync"
	"testing"
	"time"

	"github.com/whimbrel/whimbrel/notify"
	"github.com/whimbrel/whimbrel/state"
)

const secret = "s3cret"

func TestMain(m *testing.M) {
	// The deliverers read a webhook's secret from their environment, as
	// a monitor does.
	os.Setenv("WHIMBREL_TEST_HOOK_SECRET", secret)
	// The EventBridge client's default chain, without a real account.
	for k, v := range map[string]string{"AWS_REGION": "us-east-1", "AWS_ACCESS_KEY_ID": "whimbrel", "AWS_SECRET_ACCESS_KEY": "whimbrel",
		"AWS_EC2_METADATA_DISABLED": "true", "AWS_CONFIG_FILE": "/dev/null", "AWS_SHARED_CREDENTIALS_FILE": "/dev/null"} {
		os.Setenv(k, v)
	}
	os.Exit(m.Run())
}

// TestDeliveredOnceOnFailure: a failed run's notification reaches the
// receiver once, signed, naming the workflow, the execution, the failed
// activity with its exit code and last stderr lines, the params and the
// link; the item is DELIVERED and out of the due index.
func TestDeliveredOnceOnFailure(t *testing.T) {
	t.Parallel()
	for _, kind := range kinds {
		t.Run(kind, func(t *testing.T) {
			t.Parallel()
			st, setup := open2(t, kind)
			rcv := newReceiver(t, nil)
			id := start(t, st, def(t, "nightly", rcv.URL, "failed", ""))
			failWith(t, st, setup, id)
			d := deliverer(st, notify.Config{WebURL: "http://web.example/"})
			until(t, "one delivery", func() bool { d.Once(ctx(t)); return len(rcv.all()) > 0 })
			for i := 0; i < 3; i++ { // nothing more is due
				d.Once(ctx(t))
			}
			hits := rcv.all()
			if len(hits) != 1 {
				t.Fatalf("%d deliveries, want 1: %+v", len(hits), hits)
			}
			h := hits[0]
			if h.Signature != notify.Sign(secret, h.Raw) || h.ID == "" || h.Body.DeliveryID != h.ID || h.Event != "failed" {
				t.Errorf("headers: id %q signature %q event %q", h.ID, h.Signature, h.Event)
			}
			b := h.Body
			if b.WorkflowName != "nightly" || b.WorkflowExecID != id || b.Event != "failed" || b.State != "FAILED" ||
				b.Params["region"] != "eu" || b.Link != "http://web.example/workflows/"+urlEscape(id) {
				t.Errorf("body: %s", h.Raw)
			}
			if len(b.Failed) != 1 || b.Failed[0].Name != "extract" || b.Failed[0].ExitCode == nil || *b.Failed[0].ExitCode != 3 ||
				!contains(b.Failed[0].Stderr, "line 2") {
				t.Errorf("failed activities: %+v", b.Failed)
			}
			ns, err := setup.NotificationsOf(ctx(t), id) // the test's own read: no faults
			if err != nil {
				t.Fatal(err)
			}
			states := map[string]state.NotificationState{}
			for _, n := range ns {
				states[n.ID] = n.State
			}
			if states["failed/0"] != state.NotificationDelivered || states[state.WatchID] != state.NotificationDone || len(ns) != 2 {
				t.Errorf("items: %v", states)
			}
			// The index may lag (the fault proxy makes it): the item
			// leaves it once the index catches up.
			until(t, "the delivered item out of the due index", func() bool {
				due, err := st.DueNotifications(ctx(t), time.Now().Add(48*time.Hour), 0)
				return err == nil && len(due) == 0
			})
		})
	}
}

// TestRetriedUntilTaken: a receiver that answers 500 three times, then 200,
// takes one delivery, and every try carried the same delivery ID; the
// item records the attempts.
func TestRetriedUntilTaken(t *testing.T) {
	t.Parallel()
	for _, kind := range []string{"sqlite", "faulty"} {
		t.Run(kind, func(t *testing.T) {
			t.Parallel()
			st, setup := open2(t, kind)
			rcv := newReceiver(t, func(i int) int {
				if i < 3 {
					return 500
				}
				return 200
			})
			id := start(t, st, def(t, "retried", rcv.URL, "failed", ""))
			failWith(t, st, setup, id)
			run(t, deliverer(st, notify.Config{}))
			until(t, "a delivery taken", func() bool { return len(rcv.ok()) == 1 })
			time.Sleep(time.Second) // nothing more may come
			hits := rcv.all()
			if len(hits) != 4 {
				t.Fatalf("%d tries, want 4", len(hits))
			}
			for _, h := range hits {
				if h.ID != hits[0].ID {
					t.Errorf("delivery IDs differ: %q, %q", h.ID, hits[0].ID)
				}
			}
			n, err := setup.GetNotification(ctx(t), id, "failed/0") // the test's own read: no faults
			if err != nil {
				t.Fatal(err)
			}
			if n.State != state.NotificationDelivered || n.Attempts != 4 {
				t.Errorf("item: %s after %d attempts", n.State, n.Attempts)
			}
		})
	}
}

// TestHangingReceiverCutOff: a receiver that never answers is cut off by
// the timeout, the try recorded as failed with its error, and retried
// until the receiver answers.
func TestHangingReceiverCutOff(t *testing.T) {
	t.Parallel()
	st := open(t, "dynamodb")
	rcv := newReceiver(t, func(i int) int {
		if i < 2 {
			return 0 // hang
		}
		return 204
	})
	id := start(t, st, def(t, "hung", rcv.URL, "failed", ""))
	fail(t, st, id)
	d := deliverer(st, notify.Config{Timeout: 300 * time.Millisecond})
	began := time.Now()
	until(t, "a first try cut off", func() bool {
		d.Once(ctx(t))
		n, err := st.GetNotification(ctx(t), id, "failed/0")
		return err == nil && n.Attempts >= 1 && n.LastError != ""
	})
	if took := time.Since(began); took > 30*time.Second {
		t.Errorf("a hanging receiver held the deliverer %s", took)
	}
	n, _ := st.GetNotification(ctx(t), id, "failed/0")
	if !contains(n.LastError, "deadline exceeded") && !contains(n.LastError, "Timeout") {
		t.Errorf("last error %q does not say it timed out", n.LastError)
	}
	run(t, d)
	until(t, "delivered after the receiver recovered", func() bool { return len(rcv.ok()) == 1 })
}

// TestTwoDeliverers: two deliverers on one store deliver every
// notification; a receiver takes each delivery ID at most twice and none
// is lost.
func TestTwoDeliverers(t *testing.T) {
	t.Parallel()
	for _, kind := range []string{"dynamodb", "sqlite"} {
		t.Run(kind, func(t *testing.T) {
			t.Parallel()
			st := open(t, kind)
			rcv := newReceiver(t, func(i int) int {
				if i%3 == 0 {
					return 503
				}
				return 200
			})
			const runs = 8
			var ids []string
			for i := 0; i < runs; i++ {
				id := start(t, st, def(t, "two", rcv.URL, "failed", ""))
				fail(t, st, id)
				ids = append(ids, id)
			}
			run(t, deliverer(st, notify.Config{Concurrency: 2}))
			run(t, deliverer(st, notify.Config{Concurrency: 2}))
			until(t, "every notification delivered", func() bool { return len(rcv.ok()) == runs })
			time.Sleep(time.Second)
			for id, n := range rcv.ok() {
				if n > 2 {
					t.Errorf("delivery %s taken %d times", id, n)
				}
			}
			seen := map[string]bool{}
			for _, h := range rcv.all() {
				seen[h.Body.WorkflowExecID] = true
			}
			for _, id := range ids {
				if !seen[id] {
					t.Errorf("the notification of %s was lost", id)
				}
			}
		})
	}
}

// TestDeadlineFiresOnce: a run not settled by its deadline is
// deadline_missed exactly once, though four deliverers watch it.
func TestDeadlineFiresOnce(t *testing.T) {
	t.Parallel()
	for _, kind := range []string{"faulty", "sqlite"} {
		t.Run(kind, func(t *testing.T) {
			t.Parallel()
			st, setup := open2(t, kind)
			rcv := newReceiver(t, nil)
			id := start(t, st, def(t, "late", rcv.URL, "deadline_missed", "deadline: 2s\n"))
			var wg sync.WaitGroup
			for i := 0; i < 4; i++ {
				run(t, deliverer(st, notify.Config{}))
			}
			wg.Wait()
			until(t, "the deadline notified", func() bool { return len(rcv.ok()) > 0 })
			time.Sleep(2 * time.Second)
			hits := rcv.all()
			if len(hits) != 1 || hits[0].Event != "deadline_missed" || hits[0].Body.WorkflowExecID != id || hits[0].Body.State != "RUNNING" {
				t.Fatalf("deliveries: %+v", hits)
			}
			w, err := setup.GetNotification(ctx(t), id, state.WatchID) // the test's own read: no faults
			if err != nil || !w.DeadlineFired || w.State != state.NotificationWatching {
				t.Errorf("watch: %+v %v", w, err)
			}
		})
	}
}
