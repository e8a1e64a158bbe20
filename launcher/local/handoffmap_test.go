package local_test

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/whimbrel/whimbrel/launcher"
	"github.com/whimbrel/whimbrel/launcher/internal/launchtest"
	"github.com/whimbrel/whimbrel/launcher/local"
	"github.com/whimbrel/whimbrel/state"
)

// TestInlineMapElementsStartWithoutTheInterval: the elements of a
// for_each map that an activity supervised inline opens, and the pages
// its elements' advances create, start without waiting for the
// launcher's interval (a minute here, longer than the test's bound):
// the handoff names only the map or a page's first element, so a pass
// that lists the READY index is woken for the rest.
func TestInlineMapElementsStartWithoutTheInterval(t *testing.T) {
	t.Parallel()
	for _, tc := range inlineStores()[:2] { // the embedded store and DynamoDB Local
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			st, own := tc.open(t)
			id, _ := launchtest.Start(t, own, `name: handoffmap
activities:
  open:
    command: ["true"]
  each:
    depends_on: [open]
    for_each: {count: 200}
    command: ["true"]
`)
			lb := &local.Backend{Wrapper: "/nonexistent/whimbrel-run", LogDir: t.TempDir(), Supervise: local.SuperviseInline, Store: st,
				Env: []string{"PATH=" + os.Getenv("PATH"), "WHIMBREL_LOG_LEVEL=info"}}
			l := local.NewLauncher(st, launcher.Config{Interval: time.Minute}, lb, nil)
			ctx, cancel := context.WithCancel(launchtest.Context(t))
			done := make(chan error, 1)
			go func() { done <- l.Run(ctx) }()
			defer func() {
				cancel()
				<-done
				lb.Stop(30 * time.Second)
			}()
			wf := launchtest.WaitSettled(t, own, id, 60*time.Second)
			if wf.State != state.WorkflowCompleted {
				t.Fatalf("workflow %s: %s", wf.State, wf.Reason)
			}
		})
	}
}
