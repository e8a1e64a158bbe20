package workflow

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"

	"github.com/hashicorp/go-hclog"

	"github.com/whimbrel/whimbrel/definition"
	"github.com/whimbrel/whimbrel/internal/clock"
	"github.com/whimbrel/whimbrel/internal/fault"
	"github.com/whimbrel/whimbrel/state"
)

// A for_each activity is a map (docs/for-each.md): one item stands for
// the whole map and runs while its elements do, and each element of its
// list is an item of its own, created READY in index order, in pages, by
// the participants that already advance the workflow: whoever readies the
// map, each element's wrapper as it ends, and the monitor as repair. The
// map's item keeps the account (state.MapProgress), changed only by
// compare-and-set; no participant coordinates the others.

// PageSize is the most elements one step creates, or cancels.
const PageSize = 100

// DefaultWindow is how many elements may be created and not final at once
// when the activity sets no max_running: the pace at which a map's
// elements are written ahead of the slowest.
const DefaultWindow = 1000

// maxStepTries bounds the compare-and-set loop of one step: each failed
// try means another participant moved the account on.
const maxStepTries = 200

// forEach returns the definition's entry for the named activity when it is
// a for_each activity.
func (g graph) forEach(name string) *definition.Activity {
	if a := g.activity(name); a != nil && a.ForEach != nil {
		return a
	}
	return nil
}

// isMap reports whether a is the item that stands for a whole map.
func (g graph) isMap(a *state.ActivityExec) bool {
	return a.ItemIndex == nil && g.forEach(a.ActivityName) != nil
}

// mapKey is the key of the map item of the named activity.
func (g graph) mapKey(name string) state.ActivityKey {
	return state.ActivityKey{ActivityExecID: state.ActivityExecIDFor(g.id, name), WorkflowExecID: g.id}
}

// readyMap resolves the edge from upID (none when empty) of the map k,
// and opens the map once nothing is pending: the map's move out of
// REQUESTED is its listing, not a launch.
func readyMap(ctx context.Context, st Advancer, g graph, k state.ActivityKey, upID string, log hclog.Logger) (readied, waiting bool, err error) {
	var m *state.ActivityExec
	if upID != "" {
		m, _, err = st.ResolveDependency(ctx, k, upID)
	} else {
		m, err = st.GetActivity(ctx, k)
	}
	if err != nil {
		return false, false, fmt.Errorf("open map %s: %w", k.ActivityExecID, err)
	}
	if m.State == state.Requested && len(m.PendingDependencies) > 0 {
		return false, true, nil
	}
	res, err := openMap(ctx, st, g, m, log)
	return len(res.Readied) > 0, false, err
}

// openMap takes a map whose upstreams completed from REQUESTED through
// QUEUED (held by state.MapOwner, so no launcher takes it) to RUNNING,
// lists its elements, and writes the first pages. A list that cannot be
// made fails the map before any element is written. Each move is
// conditional, so a repeat from any state finishes what an earlier one
// began.
func openMap(ctx context.Context, st Advancer, g graph, m *state.ActivityExec, log hclog.Logger) (Result, error) {
	act := g.forEach(m.ActivityName)
	if act == nil {
		return Result{}, fmt.Errorf("open map %s: %s is not a for_each activity", m.ActivityExecID, m.ActivityName)
	}
	var err error
	if m.State == state.Requested {
		m, err = moveMap(ctx, st, m, state.ActivityChange{
			From: []state.ActivityState{state.Requested}, To: state.Queued, Hold: state.MapOwner,
			Reason: "a for_each map: its elements are being listed",
		})
		if err != nil {
			return Result{}, err
		}
	}
	if m.State == state.Queued && m.Owner == state.MapOwner {
		elements, err := mapElements(ctx, st, g, act, m.ActivityName)
		var le *listError
		switch {
		case errors.As(err, &le):
			failed, err := moveMap(ctx, st, m, state.ActivityChange{
				From: []state.ActivityState{state.Queued}, To: state.Failed, Owner: state.MapOwner,
				Reason: "for_each: " + le.Error(),
			})
			if err != nil || failed.State != state.Failed {
				return Result{}, err
			}
			log.Warn("a for_each map failed: its list cannot be made", "activity_exec_id", m.ActivityExecID, "reason", le.Error())
			return advance(ctx, st, g, failed, log)
		case err != nil:
			return Result{}, fmt.Errorf("open map %s: %w", m.ActivityExecID, err)
		}
		tolerated, _ := act.ToleratedFailures.Of(len(elements)) // checked when the definition was read
		window := act.MaxRunning
		if window <= 0 {
			window = DefaultWindow
		}
		acc := state.MapProgress{Items: len(elements), Window: window, Tolerated: tolerated}
		if prior, err := state.ParseMap(m.Map); m.Map != "" && err == nil {
			acc.CarryFrom = prior.CarryFrom // a redrive's, written at its start
		}
		m, err = moveMap(ctx, st, m, state.ActivityChange{
			From: []state.ActivityState{state.Queued}, To: state.Running, Owner: state.MapOwner,
			Claim:  &state.Claim{Owner: state.MapOwner, Host: "for_each"},
			Swap:   &state.Swap{Attr: "map", Old: m.Map, New: acc.Encode()},
			Reason: fmt.Sprintf("a for_each map of %d elements", len(elements)),
		})
		if err != nil {
			return Result{}, err
		}
	}
	if m.State != state.Running || m.Map == "" {
		return Result{}, nil // ended, or taken by a client that is not Whimbrel
	}
	return stepMap(ctx, st, g, m, log)
}

// moveMap makes one move of a map's item; when another participant moved
// it first, it returns the item as that one left it.
func moveMap(ctx context.Context, st Advancer, m *state.ActivityExec, c state.ActivityChange) (*state.ActivityExec, error) {
	next, err := st.UpdateActivity(ctx, m.ActivityKey, c)
	if errors.Is(err, state.ErrConflict) {
		next, err = st.GetActivity(ctx, m.ActivityKey)
	}
	if err != nil {
		return nil, fmt.Errorf("open map %s: %w", m.ActivityExecID, err)
	}
	return next, nil
}

// listError says why a for_each's list cannot be made: the map fails
// with it.
type listError struct{ err error }

func (e *listError) Error() string { return e.err.Error() }

// elementCache keeps the lists this process made, by map item: a list
// never changes once its upstreams completed, and a monitor or a local
// run steps the same map many times.
var elementCache = struct {
	sync.Mutex
	byID map[string][]json.RawMessage
}{byID: map[string][]json.RawMessage{}}

// mapElements makes the list of the named map from the execution's
// parameters and its upstreams' outputs. A *listError says what is wrong
// with the list; any other error, that the store did not answer.
func mapElements(ctx context.Context, st Advancer, g graph, act *definition.Activity, name string) ([]json.RawMessage, error) {
	key := g.mapKey(name).ActivityExecID + "/" + g.id
	elementCache.Lock()
	cached, ok := elementCache.byID[key]
	elementCache.Unlock()
	if ok {
		return cached, nil
	}
	params, err := definition.StoredParams(g.params)
	if err != nil {
		return nil, &listError{err}
	}
	dt := definition.Data{Params: params, Outputs: map[string]json.RawMessage{}}
	for _, up := range act.DependsOn {
		a, err := finalAttempt(ctx, st, g.mapKey(up))
		if err != nil {
			return nil, fmt.Errorf("read the output of %s: %w", up, err)
		}
		if a != nil && a.Output != "" && json.Valid([]byte(a.Output)) {
			dt.Outputs[up] = json.RawMessage(a.Output)
		}
	}
	env := act.Env
	if eff, err := g.def.Effective(name); err == nil {
		env = eff.Env
	}
	list, err := act.Elements(dt, env)
	if err != nil {
		return nil, &listError{err}
	}
	elementCache.Lock()
	if len(elementCache.byID) >= 64 {
		clear(elementCache.byID)
	}
	elementCache.byID[key] = list
	elementCache.Unlock()
	return list, nil
}

// finalAttempt follows the retry links from k to the latest attempt.
func finalAttempt(ctx context.Context, st Advancer, k state.ActivityKey) (*state.ActivityExec, error) {
	for hops := 0; hops < 1000; hops++ {
		a, err := st.GetActivity(ctx, k)
		if err != nil || a.RetriedBy == "" {
			return a, err
		}
		k.ActivityExecID = a.RetriedBy
	}
	return nil, fmt.Errorf("the retries of %s do not end", k.ActivityExecID)
}

// advanceItem carries the end of one element's attempt to its map: a
// retry when its policy asks for one, else a step of the map's account.
func advanceItem(ctx context.Context, st Advancer, g graph, a *state.ActivityExec, log hclog.Logger) (Result, error) {
	var res Result
	if a.State != state.Completed {
		var err error
		if res.Retried, err = retry(ctx, st, g, a, log); err != nil || res.Retried != "" {
			return res, err
		}
	}
	if a.ItemIndex == nil || !a.State.Terminal() {
		return res, nil
	}
	want, err := countElement(ctx, st, g, a.ActivityName, *a.ItemIndex, a.State)
	if err != nil || !want.any() {
		return res, err
	}
	// The shards are read before the map's item, which is then read only
	// when a step is due.
	if due, err := want.due(ctx, st, g, a.ActivityName, state.ShardOf(*a.ItemIndex)); err != nil || !due {
		return res, err
	}
	more, err := stepMapShared(ctx, st, g, a.ActivityName, log) // foreach_single.go
	if err != nil {
		return more, fmt.Errorf("advance after %s: %w", a.ActivityExecID, err)
	}
	return more, nil
}

// StepMap takes one step of the map m (its item): what an element's
// wrapper does as it ends, and what the monitor does to finish a step
// a participant left half-done. With repair it first writes every
// element below the account's created that is missing.
func StepMap(ctx context.Context, st Advancer, m *state.ActivityExec, repair bool, log hclog.Logger) (Result, error) {
	if log == nil {
		log = hclog.NewNullLogger()
	}
	g, err := graphOf(ctx, st, m.WorkflowExecID)
	if err != nil {
		return Result{}, fmt.Errorf("step map %s: %w", m.ActivityExecID, err)
	}
	if !g.isMap(m) {
		return Result{}, nil
	}
	switch {
	case m.State == state.Requested || (m.State == state.Queued && m.Owner == state.MapOwner):
		if m.State == state.Requested && len(m.PendingDependencies) > 0 {
			return Result{}, nil
		}
		return openMap(ctx, st, g, m, log)
	case m.State == state.Running && m.Map != "":
		if repair {
			if err := repairPages(ctx, st, g, m); err != nil {
				return Result{}, err
			}
		}
		return stepMapCounting(ctx, st, g, m, PageSize, log)
	}
	return Result{}, nil
}

// stepMap moves the map's account on: it sums the counts of its shards,
// counts the first element not counted when it is final (its wrapper died
// before counting it), cancels those not started once more failed than
// tolerated, creates the next page when the window has room, and ends the
// map once every element it will have is counted. Each change of the
// account is one compare-and-set; a participant that loses reads the
// account and the shards again and goes on from there.
func stepMap(ctx context.Context, st Advancer, g graph, m *state.ActivityExec, log hclog.Logger) (Result, error) {
	return stepMapCounting(ctx, st, g, m, 1, log)
}

// stepMapCounting is stepMap counting up to front elements at the front
// of the list that are final and not counted. An element's wrapper looks
// at one: the elements at the front have mostly just ended, and their own
// wrappers count them. The monitor counts up to a page: those whose
// wrappers died.
func stepMapCounting(ctx context.Context, st Advancer, g graph, m *state.ActivityExec, front int, log hclog.Logger) (Result, error) {
	var res Result
	act := g.forEach(m.ActivityName)
	if act == nil {
		return res, nil
	}
	var sum *shardSum
	for try := 0; try < maxStepTries; try++ {
		if m.State != state.Running || m.Map == "" {
			return res, nil
		}
		acc, err := state.ParseMap(m.Map)
		if err != nil {
			return res, fmt.Errorf("step map %s: %w", m.ActivityExecID, err)
		}
		if sum == nil {
			if sum, err = readShards(ctx, st, g, m.ActivityName, acc.Items, acc.Created); err != nil {
				return res, err
			}
		}
		cancel := false
		for n := 0; sum.Done < acc.Created && n < front; n++ {
			// The first element not counted: final when its wrapper died
			// before counting it, or missing when its page's writer died.
			a, final, err := element(ctx, st, g, m, act, sum.Done, acc.Created, acc.Stopped)
			if err != nil {
				return res, err
			}
			if !final {
				cancel = acc.Stopped && a != nil && a.State.NotStarted()
				break
			}
			if _, err := countElement(ctx, st, g, m.ActivityName, sum.Done, a.State); err != nil {
				return res, err
			}
			sum.add(sum.Done, a.State)
		}
		next := *acc
		next.Done, next.Completed, next.Failed, next.Cancelled = sum.Done, sum.Completed, sum.Failed, sum.Cancelled
		next.FirstFailed = sum.FirstFailed
		if next.Failed > next.Tolerated && !next.Stopped {
			next.Stopped, cancel = true, true
		}
		lo := next.Created
		if room := min(next.Items, next.Done+next.Window) - lo; !next.Stopped && room > 0 && (room >= min(PageSize, stride(next.Window)) || lo+room == next.Items) {
			// A page is announced only when the window has room for a
			// whole one (or for the list's rest), so that the map's item
			// is written once per page, not once per element that ends.
			next.Created = lo + min(room, PageSize)
		}
		ended := sum.Counted >= next.Items || (next.Stopped && sum.Counted >= next.Created)
		if !ended && !cancel && next.Created == lo && next.Stopped == acc.Stopped {
			// Nothing to announce: the account is not written for its
			// counts alone, which the shards hold, so that the map's item
			// is written once per page, not once per step.
			return res, nil
		}
		c := state.ActivityChange{From: []state.ActivityState{state.Running}, Owner: state.MapOwner,
			Swap: &state.Swap{Attr: "map", Old: m.Map, New: next.Encode()}}
		if ended {
			c.To, c.Reason, c.Output = mapOutcome(m.ActivityName, next)
			if c.To == state.Completed {
				c.Exit = &state.Exit{Code: 0}
			}
		}
		written, err := st.UpdateActivity(ctx, m.ActivityKey, c)
		if errors.Is(err, state.ErrConflict) {
			// The read goes to its own variable: on an error m must still
			// name the map for the message.
			now, err := st.GetActivity(ctx, m.ActivityKey)
			if err != nil {
				return res, fmt.Errorf("step map %s: %w", m.ActivityExecID, err)
			}
			m = now
			sum = nil // another step moved it: the shards have moved too
			continue
		}
		if err != nil {
			return res, fmt.Errorf("step map %s: %w", m.ActivityExecID, err)
		}
		m = written
		if next.Created > lo {
			if err := createElements(ctx, st, g, m, act, lo, next.Created, false); err != nil {
				return res, err
			}
			res.Readied = append(res.Readied, state.ItemExecIDFor(g.id, m.ActivityName, lo))
		}
		if ended {
			log.Info("a for_each map ended", "activity_exec_id", m.ActivityExecID, "state", m.State, "reason", m.Reason)
			more, err := advance(ctx, st, g, m, log)
			more.Readied = append(res.Readied, more.Readied...)
			return more, err
		}
		if cancel {
			if err := cancelElements(ctx, st, g, m, act, next, sum); err != nil {
				return res, err
			}
			sum = nil // the cancelled are counted
		}
	}
	return res, fmt.Errorf("step map %s: its account kept changing under %d tries; the monitor goes on", m.ActivityExecID, maxStepTries)
}

// mapOutcome is how a map whose elements are all final ends.
func mapOutcome(name string, acc state.MapProgress) (state.ActivityState, string, string) {
	out := fmt.Sprintf(`{"items":%d,"completed":%d,"failed":%d}`, acc.Items, acc.Completed, acc.Failed)
	if !acc.Stopped && acc.Cancelled == 0 {
		why := fmt.Sprintf("%d of %d elements completed", acc.Completed, acc.Items)
		if acc.Failed > 0 {
			why += fmt.Sprintf("; %d failed, within the %d tolerated", acc.Failed, acc.Tolerated)
		}
		return state.Completed, why, out
	}
	var first []string
	for _, i := range acc.FirstFailed {
		first = append(first, state.ItemName(name, i))
	}
	why := fmt.Sprintf("%d of %d elements failed, more than the %d tolerated", acc.Failed, acc.Items, acc.Tolerated)
	if len(first) > 0 {
		why += ": " + strings.Join(first, ", ")
		if acc.Failed > len(first) {
			why += ", …"
		}
	}
	if acc.Cancelled > 0 {
		why += fmt.Sprintf("; %d cancelled", acc.Cancelled)
	}
	if !acc.Stopped {
		why = fmt.Sprintf("%d of %d elements were cancelled", acc.Cancelled, acc.Items)
	}
	return state.Failed, why, out
}

// element reads the latest attempt of element i and reports whether it
// is final (a stopped map retries nothing). An element below created that
// is missing was left by a participant that died while writing its page:
// it is written now, with the page's rest after it (up to a page, none
// past created). Writing it alone would leave the map to crawl through
// the lost page one element a step, each written only once the one
// before it ended, and so never look stalled to the monitor.
func element(ctx context.Context, st Advancer, g graph, m *state.ActivityExec, act *definition.Activity, i, created int, stopped bool) (*state.ActivityExec, bool, error) {
	a, err := finalAttempt(ctx, st, state.ActivityKey{ActivityExecID: state.ItemExecIDFor(g.id, m.ActivityName, i), WorkflowExecID: g.id})
	if errors.Is(err, state.ErrNotFound) {
		return nil, false, createElements(ctx, st, g, m, act, i, min(created, i+PageSize), true)
	}
	if err != nil {
		return nil, false, fmt.Errorf("step map %s: read element %d: %w", m.ActivityExecID, i, err)
	}
	if !a.State.Terminal() {
		return a, false, nil
	}
	if !stopped && retries(g.policy(a), a) {
		// Its retry is still to be made: its wrapper died before deciding it.
		next, err := retry(ctx, st, g, a, hclog.NewNullLogger())
		if err != nil || next != "" {
			return a, false, err
		}
	}
	return a, true, nil
}

// createElements writes elements lo..hi-1 of the map, READY; one already
// written is left as it is. With lostPage it stops at the first one
// already written: a page's writer writes in index order, so one that
// died left the rest of its page missing, and what follows an element
// that exists was written by another.
func createElements(ctx context.Context, st Advancer, g graph, m *state.ActivityExec, act *definition.Activity, lo, hi int, lostPage bool) error {
	list, err := mapElements(ctx, st, g, act, m.ActivityName)
	if err != nil {
		return fmt.Errorf("step map %s: %w", m.ActivityExecID, err)
	}
	now := state.Truncate(clock.Now())
	var from string
	if acc, err := state.ParseMap(m.Map); err == nil {
		from = acc.CarryFrom
	}
	for i := lo; i < hi && i < len(list); i++ {
		if hi-lo > 1 && i == lo+(hi-lo)/2 {
			fault.Point(fault.MidPage)
		}
		if from != "" {
			if carried, err := carryElement(ctx, st, g, m, from, i, string(list[i]), len(list)); err != nil || carried {
				if err == nil {
					// No wrapper ends a carried element: its writer counts it.
					_, err = countElement(ctx, st, g, m.ActivityName, i, state.Completed)
				}
				if err != nil {
					return fmt.Errorf("step map %s: carry element %d: %w", m.ActivityExecID, i, err)
				}
				continue
			}
		}
		idx := i
		err := st.CreateActivity(ctx, &state.ActivityExec{
			ActivityKey:  state.ActivityKey{ActivityExecID: state.ItemExecIDFor(g.id, m.ActivityName, i), WorkflowExecID: g.id},
			WorkflowName: m.WorkflowName, ActivityName: m.ActivityName, State: state.Ready, StateTime: now,
			ItemIndex: &idx, Item: string(list[i]), Attempt: 1,
			Reason: fmt.Sprintf("element %d of %d of the for_each map %s", i, len(list), m.ActivityName),
		})
		if lostPage && i > lo && errors.Is(err, state.ErrConflict) {
			return nil
		}
		if err != nil && !errors.Is(err, state.ErrConflict) {
			return fmt.Errorf("step map %s: write element %d: %w", m.ActivityExecID, i, err)
		}
	}
	return nil
}

// cancelElements cancels the elements of a stopped map that have not
// started, a page at most, and counts those that are final and not
// counted (a stopped map retries nothing).
func cancelElements(ctx context.Context, st Advancer, g graph, m *state.ActivityExec, act *definition.Activity, acc state.MapProgress, sum *shardSum) error {
	for i := acc.Done; i < acc.Created && i < acc.Done+PageSize; i++ {
		if sum.counted(i) {
			continue
		}
		a, err := finalAttempt(ctx, st, elementKey(g, m.ActivityName, i))
		if errors.Is(err, state.ErrNotFound) {
			continue
		}
		if err != nil {
			return fmt.Errorf("step map %s: %w", m.ActivityExecID, err)
		}
		if a.State.NotStarted() {
			a, err = st.UpdateActivity(ctx, a.ActivityKey, state.ActivityChange{
				From: []state.ActivityState{state.Requested, state.Ready, state.Queued}, To: state.Cancelled,
				Reason: fmt.Sprintf("the for_each map %s stopped: %d elements failed, more than the %d tolerated", m.ActivityName, acc.Failed, acc.Tolerated),
			})
			if errors.Is(err, state.ErrConflict) {
				continue // it started: its wrapper counts it as it ends
			}
			if err != nil {
				return fmt.Errorf("step map %s: cancel element %d: %w", m.ActivityExecID, i, err)
			}
		}
		if a.State.Terminal() {
			if _, err := countElement(ctx, st, g, m.ActivityName, i, a.State); err != nil {
				return err
			}
		}
	}
	return nil
}

// repairPages finishes what participants that died left below the
// account's created: it writes the elements of a page whose writer died,
// makes the retries whose wrapper died before deciding them, and counts
// the final elements whose wrapper died before counting them. It reads
// every element between done and created not counted, so the monitor
// calls it only for a map that did not move.
func repairPages(ctx context.Context, st Advancer, g graph, m *state.ActivityExec) error {
	act := g.forEach(m.ActivityName)
	acc, err := state.ParseMap(m.Map)
	if act == nil || err != nil {
		return err
	}
	sum, err := readShards(ctx, st, g, m.ActivityName, acc.Items, acc.Created)
	if err != nil {
		return fmt.Errorf("repair map %s: %w", m.ActivityExecID, err)
	}
	for i := sum.Done; i < acc.Created; i++ {
		if sum.counted(i) {
			continue
		}
		a, final, err := element(ctx, st, g, m, act, i, acc.Created, acc.Stopped)
		if err == nil && final {
			_, err = countElement(ctx, st, g, m.ActivityName, i, a.State)
		}
		if err != nil {
			return fmt.Errorf("repair map %s: %w", m.ActivityExecID, err)
		}
	}
	return nil
}

// openMapAtStart opens a map that waits on nothing, as Start readies the
// activities that wait on nothing.
func openMapAtStart(ctx context.Context, st Advancer, k state.ActivityKey) error {
	m, err := st.GetActivity(ctx, k)
	if err != nil {
		return fmt.Errorf("open map %s: %w", k.ActivityExecID, err)
	}
	_, err = StepMap(ctx, st, m, false, nil)
	return err
}
