package local_test

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/whimbrel/whimbrel/launcher/internal/launchtest"
	"github.com/whimbrel/whimbrel/state"
)

// TestInlineFinallySeesTheOutcome: a finally activity supervised inline
// is claimed with the workflow item the launcher read before the outcome
// was decided (when it launched the activity that failed), and still
// sees the outcome, in its environment and its templates.
func TestInlineFinallySeesTheOutcome(t *testing.T) {
	t.Parallel()
	for _, tc := range inlineStores() {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			st, own := tc.open(t)
			seen := filepath.Join(t.TempDir(), "seen")
			id, _ := launchtest.Start(t, own, `name: inline-finally
activities:
  bad: {command: [sh, -c, 'exit 3']}
finally:
  cleanup:
    env: {STATE: "{{ workflow.state }}"}
    command: [sh, -c, 'echo "$WHIMBREL_WORKFLOW_STATE $STATE" > `+seen+`']
`)
			runInline(t, st)
			runMonitor(t, st)
			wf := launchtest.WaitSettled(t, own, id, 2*time.Minute)
			if wf.State != state.WorkflowFailed {
				t.Errorf("workflow %s (%s), want FAILED", wf.State, wf.Reason)
			}
			if b, err := os.ReadFile(seen); err != nil || string(b) != "FAILED FAILED\n" {
				t.Errorf("the finally activity saw %q (%v); want FAILED in its environment and its template", b, err)
			}
		})
	}
}
