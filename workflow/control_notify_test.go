package workflow_test

import (
	"testing"

	"github.com/whimbrel/whimbrel/internal/testbin"
	"github.com/whimbrel/whimbrel/state"
	"github.com/whimbrel/whimbrel/workflow"
)

const notifyingFinally = withFinally + `notify:
  - on: [completed, failed, cancelled]
    webhook: {url: "https://hooks.example.com/T0/B0"}
`

// TestControlledEndingNotifies: a workflow with control flow settles
// through its own path (its outcome, then its finally activities); the
// ending it records writes its notifications as any other settle does,
// after a COMPLETED, a FAILED and a cancelled run.
func TestControlledEndingNotifies(t *testing.T) {
	bothStores(t, func(t *testing.T, st state.Store) {
		ns, ok := st.(state.Notifications)
		if !ok {
			t.Fatalf("%T keeps no notifications", st)
		}
		for _, tc := range []struct {
			name    string
			endings map[string]ending
			cancel  bool
			event   string
		}{
			{"completed", nil, false, "completed"},
			{"failed", map[string]ending{"work": {to: state.Failed}}, false, "failed"},
			{"cancelled", nil, true, "cancelled"},
		} {
			t.Run(tc.name, func(t *testing.T) {
				ctx := testbin.Context(t)
				id := startYAML(t, st, notifyingFinally, nil)
				if tc.cancel {
					if _, err := workflow.Cancel(ctx, st, id, "test", nil); err != nil {
						t.Fatal(err)
					}
				}
				wf, _, _ := drive(t, st, id, tc.endings)
				if !wf.State.Terminal() {
					t.Fatalf("workflow %s; want it settled", wf.State)
				}
				items, err := ns.NotificationsOf(ctx, id)
				if err != nil {
					t.Fatal(err)
				}
				var events []string
				for _, n := range items {
					if n.Event != "" {
						events = append(events, n.Event)
					}
				}
				if len(events) != 1 || events[0] != tc.event {
					t.Errorf("deliveries written for the ending %s: %v; want one %s", wf.State, events, tc.event)
				}
			})
		}
	})
}
