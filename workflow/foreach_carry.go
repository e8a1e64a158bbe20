package workflow

import (
	"context"
	"errors"
	"fmt"

	"github.com/whimbrel/whimbrel/definition"
	"github.com/whimbrel/whimbrel/internal/clock"
	"github.com/whimbrel/whimbrel/state"
)

// A redrive (whimbrel rerun --from-failure) inside a for_each map carries
// the elements that completed into the new execution, each recorded
// COMPLETED and pointing at the old one, as its page is written; only the
// others run (docs/for-each.md).

// carryMaps names, for a redrive of the execution oldID, the maps whose
// completed elements the new execution carries: every for_each activity
// that is not itself carried whole.
func carryMaps(d *definition.Workflow, oldID string, carried map[string]*state.ActivityExec) map[string]string {
	out := map[string]string{}
	for name, a := range d.Activities {
		if a.ForEach != nil && carried[name] == nil {
			out[name] = oldID
		}
	}
	return out
}

// carryElements records, on each map of a new execution that a redrive
// carries elements into, where they come from, while the execution is
// still REQUESTED: the map's account starts with it.
func carryElements(ctx context.Context, st Advancer, id string, maps map[string]string) error {
	for name, from := range maps {
		k := state.ActivityKey{ActivityExecID: state.ActivityExecIDFor(id, name), WorkflowExecID: id}
		_, err := st.UpdateActivity(ctx, k, state.ActivityChange{From: []state.ActivityState{state.Requested},
			Swap: &state.Swap{Attr: "map", New: state.MapProgress{CarryFrom: from}.Encode()}})
		if err != nil && !errors.Is(err, state.ErrConflict) {
			return fmt.Errorf("carry the elements of %s: %w", name, err)
		}
	}
	return nil
}

// carriedMap is the account a map carried whole records: the old one's
// counts, its elements staying where they are (the old execution's, or
// wherever that one's came from).
func carriedMap(now, old *state.ActivityExec) *state.Swap {
	acc, err := state.ParseMap(old.Map)
	if old.Map == "" || err != nil {
		return nil
	}
	if acc.Created > 0 || acc.CarryFrom == "" {
		acc.CarryFrom = old.WorkflowExecID
	}
	acc.Created, acc.Done = 0, 0
	return &state.Swap{Attr: "map", Old: now.Map, New: acc.Encode()}
}

// ElementsHome is the execution that holds the elements of the map m
// (its item): its own, or, for a map a redrive carried whole, the one it
// was carried from, followed through earlier redrives.
func ElementsHome(ctx context.Context, st Reader, m *state.ActivityExec) (string, error) {
	home, cur := m.WorkflowExecID, m
	for hops := 0; hops < 100; hops++ {
		acc, err := state.ParseMap(cur.Map)
		if cur.Map == "" || err != nil || acc.Created > 0 || acc.CarryFrom == "" {
			return home, nil
		}
		home = acc.CarryFrom
		wfs, ok := st.(interface {
			GetActivity(context.Context, state.ActivityKey) (*state.ActivityExec, error)
		})
		if !ok {
			return home, nil
		}
		if cur, err = wfs.GetActivity(ctx, state.ActivityKey{ActivityExecID: state.ActivityExecIDFor(home, m.ActivityName), WorkflowExecID: home}); err != nil {
			return "", err
		}
	}
	return home, nil
}

// carryElement records element i of the map m COMPLETED, pointing at the
// attempt that completed it in the execution the redrive carries from,
// instead of writing it READY: it reports false when that one did not
// complete. The item is written REQUESTED, which no launcher takes, and
// walked through the contract's moves; a repeat finds each step done.
func carryElement(ctx context.Context, st Advancer, g graph, m *state.ActivityExec, from string, i int, el string, n int) (bool, error) {
	old, err := finalAttempt(ctx, st, state.ActivityKey{ActivityExecID: state.ItemExecIDFor(from, m.ActivityName, i), WorkflowExecID: from})
	if errors.Is(err, state.ErrNotFound) || (err == nil && old.State != state.Completed) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	k := state.ActivityKey{ActivityExecID: state.ItemExecIDFor(g.id, m.ActivityName, i), WorkflowExecID: g.id}
	idx := i
	err = st.CreateActivity(ctx, &state.ActivityExec{ActivityKey: k, WorkflowName: m.WorkflowName, ActivityName: m.ActivityName,
		State: state.Requested, StateTime: state.Truncate(clock.Now()), ItemIndex: &idx, Item: el, Attempt: 1,
		Reason: fmt.Sprintf("element %d of %d of the for_each map %s, completed in %s", i, n, m.ActivityName, from)})
	if err != nil && !errors.Is(err, state.ErrConflict) {
		return false, err
	}
	a, err := st.GetActivity(ctx, k)
	if err != nil {
		return false, err
	}
	owner := "carried-from:" + old.ActivityExecID
	steps := []state.ActivityChange{
		{From: []state.ActivityState{state.Requested}, To: state.Queued, Hold: owner},
		{From: []state.ActivityState{state.Queued}, To: state.Running, Owner: owner, Claim: &state.Claim{Owner: owner, Host: old.Host}},
		{From: []state.ActivityState{state.Running}, To: state.Completed, Owner: owner, Exit: &state.Exit{Code: 0}, Output: old.Output,
			LaunchedAs: "carried from " + old.ActivityExecID, Reason: "completed in " + from + " as " + old.ActivityExecID},
	}
	for _, c := range steps {
		if a.State != c.From[0] {
			continue
		}
		if a, err = st.UpdateActivity(ctx, k, c); err != nil {
			return false, err
		}
	}
	return true, nil
}
