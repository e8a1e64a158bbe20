package sqlite_test

import (
	"context"
	"database/sql"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/whimbrel/whimbrel/state"
)

// TestStateIndexOverRawRows: the state index is listed from its columns,
// so rows another client wrote straight into the file are listed with
// their keys and whole-second times as written (hostile IDs included),
// and a row whose columns are not what the store derives from an item
// (a time in milliseconds, a key that is not text) is reported, naming
// the attribute, instead of listed.
func TestStateIndexOverRawRows(t *testing.T) {
	st := newStore(t)
	db, err := sql.Open("sqlite", "file:"+st.Path()+"?_pragma=busy_timeout(10000)")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	wf := state.NewWorkflowExecID("raw")
	good := state.ActivityExecIDFor(wf, "x\x1b[2J<script>alert(1)</script>")
	millis := state.ActivityExecIDFor(wf, "millis")
	put := func(id any, epoch any, item string) {
		t.Helper()
		if _, err := db.Exec(fmt.Sprintf(`INSERT INTO "%sactivity_exec" (activity_exec_id, workflow_exec_id, state, state_time_epoch, item) VALUES (?, ?, 'READY', ?, ?)`, st.Prefix()),
			id, wf, epoch, item); err != nil {
			t.Fatal(err)
		}
	}
	itemOf := func(id, epoch string) string {
		return fmt.Sprintf(`{"activity_exec_id":{"S":%q},"workflow_exec_id":{"S":%q},"state":{"S":"READY"},"state_time_epoch":{"N":%q}}`, id, wf, epoch)
	}
	put(good, 1795300000, itemOf(good, "1795300000"))
	put(millis, 1795300000000, itemOf(millis, "1795300000000"))
	put(42, 1795300001, `{"workflow_exec_id":{"S":"`+wf+`"},"state":{"S":"READY"},"state_time_epoch":{"N":"1795300001"}}`)

	refs, err := st.ActivitiesInState(context.Background(), state.ActivityQuery{State: state.Ready})
	skipped, other := state.Skipped(err)
	if other != nil {
		t.Fatal(other)
	}
	if len(refs) != 1 || refs[0].ActivityExecID != good || refs[0].WorkflowExecID != wf || !refs[0].StateTime.Equal(time.Unix(1795300000, 0)) {
		t.Fatalf("listed %+v; want only %q at %v", refs, good, time.Unix(1795300000, 0).UTC())
	}
	var reported []string
	for _, de := range skipped {
		reported = append(reported, de.Error())
	}
	all := strings.Join(reported, "\n")
	if len(skipped) != 2 || !strings.Contains(all, "state_time_epoch") || !strings.Contains(all, "activity_exec_id") {
		t.Fatalf("reported %q; want the row in milliseconds (state_time_epoch) and the one without its key (activity_exec_id)", reported)
	}
}
