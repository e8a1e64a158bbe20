package attr

import (
	"errors"
	"fmt"

	"github.com/whimbrel/whimbrel/state"
)

// CheckNewActivity refuses an activity item that CreateActivity must not
// write: a retry's next attempt is a live, pending item (REQUESTED or
// READY) with a key, a name, a state time and an attempt.
func CheckNewActivity(a *state.ActivityExec) error {
	switch {
	case a == nil:
		return errors.New("no activity")
	case a.ActivityExecID == "" || a.WorkflowExecID == "":
		return errors.New("a new activity needs an activity_exec_id and a workflow_exec_id")
	case a.State != state.Requested && a.State != state.Ready:
		return fmt.Errorf("activity %s: a new activity must be %s or %s, not %s", a.ActivityExecID, state.Requested, state.Ready, a.State)
	case a.StateTime.IsZero():
		return fmt.Errorf("activity %s: a new activity needs a state time: the state index sorts by it", a.ActivityExecID)
	case a.Attempt < 1:
		return fmt.Errorf("activity %s: a new activity needs its attempt number", a.ActivityExecID)
	}
	if _, _, err := state.SplitID(a.ActivityExecID); err != nil {
		return err
	}
	return nil
}

// Exists builds the error of a CreateActivity that found an item with the
// key: a *state.ConflictError saying what that item holds.
func Exists(table, id string, old Item) error {
	d := newDecoder(table, old, "activity_exec_id")
	ce := &state.ConflictError{Kind: "activity", ID: id, Want: "no item with this key", State: d.str("state", false)}
	ce.Owner = d.str("owner", false)
	ce.Attempt, _ = d.integer("attempt")
	return ce
}
