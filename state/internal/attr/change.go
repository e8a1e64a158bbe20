package attr

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/whimbrel/whimbrel/internal/clock"
	"github.com/whimbrel/whimbrel/state"
)

// Cond is the condition of one conditional write, in terms every store can
// express. The zero Cond holds for any existing item.
type Cond struct {
	States        []string   // the item's state is one of these
	Owner         string     // the item's owner equals this ("" : any)
	NoPending     bool       // the item has no pending_dependencies
	HeartbeatSeen *time.Time // heartbeat_time_epoch no newer than this; the zero time: absent or negative
	Contains      string     // pending_dependencies contains this ("" : no condition)
	// OnlyPending: pending_dependencies holds exactly Contains.
	OnlyPending bool
	// NumericAttempt: attempt is absent or a Number, so that it can be
	// incremented.
	NumericAttempt bool
	// Match, when set, requires a String attribute to hold a value (or,
	// with an empty value, to be absent): the condition of a Swap.
	Match *Match
}

// Match is a condition on one String attribute: it holds Value, or is
// absent when Value is empty.
type Match struct{ Attr, Value string }

// Update is what one write changes.
type Update struct {
	Set Item // attributes set
	// FirstAttempt sets attempt to 1 where it is absent: a claim of a
	// first attempt; a retry's item carries its own attempt, which stays.
	FirstAttempt bool
	Delete       string // removed from pending_dependencies; the attribute goes when empty
	// Remove lists attributes the write removes (a store's own index
	// attributes, such as the DynamoDB store's state_shard).
	Remove []string
}

// Holds evaluates the condition on an item, as DynamoDB would.
func (c Cond) Holds(it Item) bool {
	if it == nil {
		return false
	}
	if len(c.States) > 0 {
		s, ok := it["state"].(S)
		if !ok || !slices.Contains(c.States, string(s)) {
			return false
		}
	}
	if c.Owner != "" && it["owner"] != S(c.Owner) {
		return false
	}
	if c.NoPending {
		if _, ok := it["pending_dependencies"]; ok {
			return false
		}
	}
	if c.HeartbeatSeen != nil {
		v, present := it["heartbeat_time_epoch"]
		got, isNumber := number(v)
		switch {
		case present && !isNumber:
			return false // DynamoDB compares no String with a Number
		case c.HeartbeatSeen.IsZero():
			if present && got >= 0 {
				return false
			}
		default:
			cutoff, _ := number(HeartbeatCutoff(*c.HeartbeatSeen))
			if !present || got >= cutoff {
				return false
			}
		}
	}
	if c.Contains != "" {
		ss, ok := it["pending_dependencies"].(SS)
		if !ok || !slices.Contains(ss, c.Contains) || (c.OnlyPending && len(ss) != 1) {
			return false
		}
	}
	if c.NumericAttempt {
		if v, present := it["attempt"]; present {
			if _, ok := v.(N); !ok {
				return false
			}
		}
	}
	if m := c.Match; m != nil {
		v, present := it[m.Attr]
		if m.Value == "" && present || m.Value != "" && v != S(m.Value) {
			return false
		}
	}
	return true
}

// HeartbeatCutoff is the first heartbeat epoch newer than seen: the times
// are stored to the millisecond, and a foreign client's finer epoch rounds
// to within one.
func HeartbeatCutoff(seen time.Time) N { return Epoch(seen.Add(time.Millisecond)) }

func number(v Value) (float64, bool) {
	n, ok := v.(N)
	if !ok {
		return 0, false
	}
	f, err := strconv.ParseFloat(string(n), 64)
	return f, err == nil && !math.IsNaN(f)
}

// Describe says in words what the condition requires, for a conflict.
func (c Cond) Describe() string {
	var parts []string
	if len(c.States) > 0 {
		parts = append(parts, "state "+joinOr(c.States))
	}
	if c.Owner != "" {
		parts = append(parts, "held by "+c.Owner)
	}
	if c.NoPending {
		parts = append(parts, "with nothing pending")
	}
	if c.HeartbeatSeen != nil {
		parts = append(parts, "with no heartbeat newer than "+c.HeartbeatSeen.UTC().Format("15:04:05.000"))
	}
	if c.Contains != "" {
		if c.OnlyPending {
			parts = append(parts, "waiting on "+c.Contains+" alone")
		} else {
			parts = append(parts, "still waiting on "+c.Contains)
		}
	}
	if c.NumericAttempt {
		parts = append(parts, "with a numeric attempt")
	}
	if m := c.Match; m != nil {
		if m.Value == "" {
			parts = append(parts, "with no "+m.Attr)
		} else {
			parts = append(parts, "with "+m.Attr+" "+m.Value)
		}
	}
	return strings.Join(parts, " ")
}

func joinOr(s []string) string {
	if len(s) <= 1 {
		return strings.Join(s, "")
	}
	return strings.Join(s[:len(s)-1], ", ") + " or " + s[len(s)-1]
}

// Apply makes the update's changes to an item, as DynamoDB would.
func (u Update) Apply(it Item) {
	for k, v := range u.Set {
		it[k] = v
	}
	for _, name := range u.Remove {
		delete(it, name)
	}
	if u.FirstAttempt {
		if _, present := it["attempt"]; !present {
			it["attempt"] = N("1")
		}
	}
	if u.Delete != "" {
		if ss, ok := it["pending_dependencies"].(SS); ok {
			rest := SS(slices.DeleteFunc(slices.Clone(ss), func(s string) bool { return s == u.Delete }))
			if len(rest) == 0 {
				delete(it, "pending_dependencies")
			} else {
				it["pending_dependencies"] = rest
			}
		}
	}
}

// ActivityChange is the condition and update of a state.ActivityChange,
// after checking it against the contract.
func ActivityChange(c state.ActivityChange) (Cond, Update, error) {
	return ActivityChangeWith(c, nil)
}

// Swap is a compare-and-set of one String attribute, made with an
// activity write: the write fails unless Attr holds Old (or, with Old
// empty, is absent), and sets it to New.
type Swap = state.Swap

// ActivityChangeWith is ActivityChange with a swap (nil: none) on the same
// item, for a store's extension.
func ActivityChangeWith(c state.ActivityChange, swap *Swap) (Cond, Update, error) {
	if swap == nil {
		swap = c.Swap
	} else if c.Swap != nil {
		return Cond{}, Update{}, errors.New("a change swaps one attribute, not two")
	}
	if len(c.From) == 0 {
		return Cond{}, Update{}, errors.New("no state to move from")
	}
	if c.To != "" {
		for _, f := range c.From {
			if err := state.CheckTransition(f, c.To); err != nil {
				return Cond{}, Update{}, err
			}
		}
	}
	if c.Claim != nil && c.Hold != "" {
		return Cond{}, Update{}, errors.New("a change records a claim or a hold, not both")
	}
	if c.Claim != nil && c.To != state.Running {
		return Cond{}, Update{}, fmt.Errorf("a claim moves to %s, not to %q", state.Running, c.To)
	}
	if c.To == state.Running && (c.Claim == nil || c.Claim.Owner == "") {
		return Cond{}, Update{}, errors.New("a move to RUNNING needs a claim with an owner token, which fences the later writes")
	}
	at := c.At
	if at.IsZero() {
		at = clock.Now()
	}
	cond := Cond{Owner: c.Owner, HeartbeatSeen: c.HeartbeatSeen}
	for _, f := range c.From {
		cond.States = append(cond.States, string(f))
	}
	if (c.To == state.Ready || c.To == state.Queued) && slices.Contains(c.From, state.Requested) {
		// READY means every activity it waits on completed; QUEUED from
		// REQUESTED (which the contract allows, though Whimbrel's own
		// launcher only takes READY ones) is for activities that wait on
		// nothing.
		cond.NoPending = true
	}
	var resolve string
	if c.Resolve != "" {
		if c.To != state.Ready || !slices.Equal(c.From, []state.ActivityState{state.Requested}) {
			return Cond{}, Update{}, fmt.Errorf("a change resolves a dependency only on the move from %s to %s", state.Requested, state.Ready)
		}
		cond.NoPending, cond.Contains, cond.OnlyPending = false, c.Resolve, true
		resolve = c.Resolve
	}
	set := Item{}
	setTime := func(name string) {
		set[name] = List(at)
		set[name+"_epoch"] = Epoch(at)
	}
	if c.To != "" {
		set["state"] = S(c.To)
		setTime("state_time")
		switch {
		case c.To == state.Queued:
			setTime("queued_time")
		case c.To == state.Running:
			setTime("start_time")
		case c.To.Terminal():
			setTime("end_time")
		}
	} else if c.Exit != nil {
		setTime("end_time")
	}
	u := Update{Set: set, Delete: resolve}
	if cl := c.Claim; cl != nil {
		set["owner"] = S(cl.Owner)
		set["host"] = S(cl.Host)
		set["pid"] = Int(cl.PID)
		set["heartbeat_enabled"] = Bool(cl.HeartbeatEnabled)
		if cl.HeartbeatEnabled {
			// The claim is the first heartbeat, in the same write: a
			// monitor that judges "RUNNING and heartbeat older than the
			// timeout" from the base contract alone never sees a live activity
			// as stale before its first beat lands.
			set["heartbeat_time"] = List(at)
			set["heartbeat_time_epoch"] = Epoch(at)
		} else {
			set["heartbeat_time_epoch"] = Int(state.NotSet) // the contract's "heartbeats off"
		}
		if cl.HeartbeatInterval > 0 {
			set["heartbeat_interval"] = Seconds(cl.HeartbeatInterval)
		}
		if cl.HeartbeatTimeout > 0 {
			set["heartbeat_timeout"] = Seconds(cl.HeartbeatTimeout)
		}
		u.FirstAttempt = true
		cond.NumericAttempt = true
	}
	if c.Hold != "" {
		set["owner"] = S(c.Hold)
	}
	if c.LaunchedAs != "" {
		set["launched_as"] = S(c.LaunchedAs)
	}
	if c.Exit != nil {
		set["exit_code"] = Int(c.Exit.Code)
		if c.Exit.Signal != "" {
			set["signal"] = S(c.Exit.Signal)
		}
	}
	if c.Error != "" {
		set["error"] = S(c.Error)
	}
	if c.Reason != "" {
		set["reason"] = S(c.Reason)
	}
	if c.RetriedBy != "" {
		set["retried_by"] = S(c.RetriedBy)
	}
	if c.Skipped {
		set["skipped"] = Bool(true)
	}
	if c.Beat {
		set["heartbeat_time"] = List(at)
		set["heartbeat_time_epoch"] = Epoch(at)
	}
	if c.Output != "" {
		if len(c.Output) > state.MaxOutput {
			return Cond{}, Update{}, fmt.Errorf("an output of %d bytes is more than the %d allowed", len(c.Output), state.MaxOutput)
		}
		set["output"] = S(c.Output)
	}
	if c.Progress != "" {
		if len(c.Progress) > state.MaxProgress {
			return Cond{}, Update{}, fmt.Errorf("a progress of %d bytes is more than the %d allowed", len(c.Progress), state.MaxProgress)
		}
		set["progress"] = S(c.Progress)
		// Only the epoch: the progress rides on a heartbeat, which must
		// stay within one write unit.
		set["progress_time_epoch"] = Epoch(at)
	}
	if swap != nil {
		if swap.Attr == "" || swap.New == "" {
			return Cond{}, Update{}, errors.New("a swap needs an attribute and a new value")
		}
		cond.Match = &Match{Attr: swap.Attr, Value: swap.Old}
		set[swap.Attr] = S(swap.New)
	}
	if len(set) == 0 {
		return Cond{}, Update{}, errors.New("nothing to change")
	}
	return cond, u, nil
}

// Heartbeat is the condition and update of a heartbeat: it sets two
// attributes that no index holds.
func Heartbeat(owner string, at time.Time) (Cond, Update) {
	return Cond{States: []string{string(state.Running)}, Owner: owner},
		Update{Set: Item{"heartbeat_time": List(at), "heartbeat_time_epoch": Epoch(at)}}
}

// ResolveDependency removes one edge, only if it is still there: a replay
// counts nothing.
func ResolveDependency(upstreamID string) (Cond, Update) {
	return Cond{Contains: upstreamID}, Update{Delete: upstreamID}
}

// WorkflowChange is the condition and update of a state.WorkflowChange.
func WorkflowChange(c state.WorkflowChange) (Cond, Update, error) {
	if len(c.From) == 0 {
		return Cond{}, Update{}, errors.New("no state to move from")
	}
	var cond Cond
	for _, f := range c.From {
		if c.To == "" && c.Outcome != "" {
			cond.States = append(cond.States, string(f))
			continue // the outcome alone is recorded; the state stays
		}
		if err := state.CheckWorkflowTransition(f, c.To); err != nil {
			return Cond{}, Update{}, err
		}
		cond.States = append(cond.States, string(f))
	}
	at := c.At
	if at.IsZero() {
		at = clock.Now()
	}
	set := Item{}
	if c.To != "" {
		set["state"] = S(c.To)
	}
	if c.Outcome != "" {
		if !c.Outcome.Terminal() {
			return Cond{}, Update{}, fmt.Errorf("outcome %s is not a settled state", c.Outcome)
		}
		set["outcome"] = S(c.Outcome)
		cond.Match = &Match{Attr: "outcome"} // recorded once: only if absent
	}
	if c.DecidedBy != "" {
		set["decided_by"] = S(c.DecidedBy)
	}
	if c.FinallyFailed != "" {
		set["finally_failed"] = S(c.FinallyFailed)
	}
	if c.To.Terminal() {
		set["end_time"] = List(at)
		set["end_time_epoch"] = Epoch(at)
	}
	if c.Reason != "" {
		set["reason"] = S(c.Reason)
	}
	return cond, Update{Set: set}, nil
}

// Conflict builds the error for a write whose condition failed on old (nil:
// the item does not exist). Only the state, owner and attempt matter, so
// another malformed attribute does not hide who won.
func Conflict(kind, table, id string, cond Cond, old Item) error {
	if old == nil {
		return &state.NotFoundError{Kind: kind, ID: id}
	}
	d := newDecoder(table, old, kind+"_exec_id")
	st := d.str("state", true)
	ce := &state.ConflictError{Kind: kind, ID: id, Want: cond.Describe(), State: st}
	if kind == "activity" {
		ce.Owner = d.str("owner", false)
		ce.Attempt, _ = d.integer("attempt")
		if !state.ActivityState(st).Valid() {
			if d.err == nil {
				d.fail("state", "%q is not an activity state", st)
			}
			return d.err
		}
	} else if !state.WorkflowState(st).Valid() {
		if d.err == nil {
			d.fail("state", "%q is not a workflow state", st)
		}
		return d.err
	}
	return ce
}

// CheckNewWorkflow refuses input that would write a workflow the contract
// cannot run: wrong states, items of another workflow, duplicate keys,
// dependency items that disagree with the pending sets, missing times
// (which would hide items from the indexes).
func CheckNewWorkflow(w *state.NewWorkflow) error {
	ex := &w.Exec
	switch {
	case ex.State != state.WorkflowRequested:
		return fmt.Errorf("a new workflow must be %s, not %s", state.WorkflowRequested, ex.State)
	case ex.WorkflowExecID == "" || ex.WorkflowName == "":
		return errors.New("a new workflow needs an ID and a name")
	case ex.StartTime.IsZero():
		return errors.New("a new workflow needs a start time: the state index sorts by it")
	case w.Request != nil && w.Request.WorkflowExecID != ex.WorkflowExecID:
		return errors.New("the request must name the execution it starts")
	}
	if _, err := state.WorkflowNameOf(ex.WorkflowExecID); err != nil {
		return err
	}
	upstreams := map[string][]string{} // waiting activity → what it waits on, from the dependency items
	acts := map[string]bool{}
	for _, a := range w.Activities {
		switch {
		case a.State != state.Requested:
			return fmt.Errorf("activity %s: a new activity must be %s, not %s", a.ActivityExecID, state.Requested, a.State)
		case a.ActivityExecID == "" || a.WorkflowExecID != ex.WorkflowExecID:
			return fmt.Errorf("activity %q: it must have an ID and belong to workflow %s", a.ActivityExecID, ex.WorkflowExecID)
		case a.StateTime.IsZero():
			return fmt.Errorf("activity %s: a new activity needs a state time: the state index sorts by it", a.ActivityExecID)
		case acts[a.ActivityExecID]:
			return fmt.Errorf("activity %s appears twice", a.ActivityExecID)
		}
		acts[a.ActivityExecID] = true
	}
	deps := map[string]bool{}
	for _, d := range w.Dependencies {
		switch {
		case d.ID == "" || d.DependentActivityExecID == "":
			return fmt.Errorf("dependency %q: it needs an ID and the activity waited on", d.ID)
		case d.WorkflowExecID != ex.WorkflowExecID || !acts[d.ActivityExecID]:
			return fmt.Errorf("dependency %s: its waiting activity %q must be an activity of workflow %s", d.ID, d.ActivityExecID, ex.WorkflowExecID)
		case deps[d.ID]:
			return fmt.Errorf("dependency %s appears twice", d.ID)
		}
		deps[d.ID] = true
		upstreams[d.ActivityExecID] = append(upstreams[d.ActivityExecID], d.DependentActivityExecID)
	}
	for _, a := range w.Activities {
		want := slices.Clone(upstreams[a.ActivityExecID])
		slices.Sort(want)
		got := slices.Clone(a.PendingDependencies)
		slices.Sort(got)
		if len(slices.Compact(slices.Clone(got))) != len(got) {
			return fmt.Errorf("activity %s: its pending dependencies repeat an activity", a.ActivityExecID)
		}
		if !slices.Equal(got, want) {
			return fmt.Errorf("activity %s: its pending dependencies %v differ from its dependency items %v", a.ActivityExecID, got, want)
		}
	}
	return nil
}

// ExpiresAt is the attribute DynamoDB's TTL deletes items by: epoch seconds.
const ExpiresAt = "expires_at"

// Expire is the update that marks an item for deletion at t.
func Expire(t time.Time) Update {
	return Update{Set: Item{ExpiresAt: N(strconv.FormatInt(t.Unix(), 10))}}
}
