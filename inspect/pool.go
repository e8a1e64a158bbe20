package inspect

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/whimbrel/whimbrel/definition"
	"github.com/whimbrel/whimbrel/internal/inert"
	"github.com/whimbrel/whimbrel/state"
)

// Pools: what `whimbrel pool list` and `pool show` print, and what status
// and the web view say of an activity in a pool (who holds, who waits,
// and why).

// PoolSource is what the pool views read.
type PoolSource interface {
	state.PoolStore
	GetWorkflow(ctx context.Context, workflowExecID string) (*state.WorkflowExec, error)
	GetActivity(ctx context.Context, key state.ActivityKey) (*state.ActivityExec, error)
	ActivitiesInState(ctx context.Context, q state.ActivityQuery) ([]state.ActivityRef, error)
}

// PoolView is one pool as the operator sees it.
type PoolView struct {
	Name        string          `json:"name"`
	Description string          `json:"description,omitempty"`
	Slots       int             `json:"slots"`
	InUse       int             `json:"in_use"`
	Waiting     int             `json:"waiting"`
	SetTime     *time.Time      `json:"set_time,omitempty"`
	Holders     []PoolHolding   `json:"holders,omitempty"`
	Waiters     []PoolHolding   `json:"waiters,omitempty"`
	Defined     bool            `json:"defined"`
	seen        map[string]bool // the waiters' IDs
}

// PoolHolding is an activity holding, or waiting for, slots of a pool.
type PoolHolding struct {
	Activity   string    `json:"activity_name"`
	ActivityID string    `json:"activity_exec_id"`
	WorkflowID string    `json:"workflow_exec_id"`
	Slots      int       `json:"slots"`
	Since      time.Time `json:"since"` // holding: since its slots were taken; waiting: since it became READY
}

// waitScan bounds how many READY activities the views read to find a
// pool's waiters.
const waitScan = 10000

// Pools lists every pool with its holders and waiters.
func Pools(ctx context.Context, st PoolSource) ([]*PoolView, error) {
	ps, err := st.ListPools(ctx)
	skipped, err := state.Skipped(err)
	if err != nil {
		return nil, err
	}
	_ = skipped // reported by the store
	views := map[string]*PoolView{}
	out := []*PoolView{}
	for _, p := range ps {
		v, err := poolView(ctx, st, p.Name)
		if err != nil {
			return nil, err
		}
		views[p.Name] = v
		out = append(out, v)
	}
	if err := addWaiters(ctx, st, views); err != nil {
		return nil, err
	}
	return out, nil
}

// Pool shows one pool; a pool that is not defined but has waiters is
// shown with them, and one with neither is not found.
func Pool(ctx context.Context, st PoolSource, name string) (*PoolView, error) {
	v, err := poolView(ctx, st, name)
	if err != nil {
		return nil, err
	}
	if err := addWaiters(ctx, st, map[string]*PoolView{name: v}); err != nil {
		return nil, err
	}
	if !v.Defined && len(v.Waiters) == 0 && len(v.Holders) == 0 {
		return nil, &state.NotFoundError{Kind: "pool", ID: name}
	}
	return v, nil
}

func poolView(ctx context.Context, st state.PoolStore, name string) (*PoolView, error) {
	s, err := state.ReadPool(ctx, st, name)
	if err != nil {
		return nil, err
	}
	v := &PoolView{Name: name, InUse: s.Held, seen: map[string]bool{}}
	if s.Pool != nil {
		v.Defined, v.Slots, v.Description, v.SetTime = true, s.Pool.Slots, s.Pool.Description, timePtr(s.Pool.SetTime)
	}
	for _, h := range s.Holders {
		name, _, _ := state.SplitID(h.ActivityExecID)
		v.Holders = append(v.Holders, PoolHolding{Activity: name, ActivityID: h.ActivityExecID, WorkflowID: h.WorkflowExecID, Slots: h.Slots, Since: h.Since})
	}
	return v, nil
}

// addWaiters finds the READY activities of the pools in views that hold
// no slot yet, oldest first: each READY item and its workflow's
// definition are read (an operator's view, never a launcher's pass).
func addWaiters(ctx context.Context, st PoolSource, views map[string]*PoolView) error {
	refs, err := st.ActivitiesInState(ctx, state.ActivityQuery{State: state.Ready, Limit: waitScan})
	if _, err = state.Skipped(err); err != nil {
		return err
	}
	// The waiters parked in the pools' queues are out of the READY
	// listing; a lagging index may list one in both.
	if q, ok := st.(state.PoolQueue); ok {
		listed := map[state.ActivityKey]bool{}
		for _, r := range refs {
			listed[r.ActivityKey] = true
		}
		for name := range views {
			parked, err := q.Parked(ctx, name, waitScan)
			if _, err = state.Skipped(err); err != nil {
				return err
			}
			for _, r := range parked {
				if !listed[r.ActivityKey] {
					listed[r.ActivityKey] = true
					refs = append(refs, r)
				}
			}
		}
	}
	defs := map[string]*definition.Workflow{}
	for _, r := range refs {
		a, err := st.GetActivity(ctx, r.ActivityKey)
		if err != nil || a.State != state.Ready {
			continue // gone since, or not readable: not a waiter to show
		}
		def, ok := defs[r.WorkflowExecID]
		if !ok {
			if wf, err := st.GetWorkflow(ctx, r.WorkflowExecID); err == nil {
				def, _ = definition.FromJSON(wf.Definition)
			}
			defs[r.WorkflowExecID] = def
		}
		if def == nil || def.Activities[a.ActivityName] == nil {
			continue
		}
		s := def.Effective(a.ActivityName)
		v := views[s.Pool]
		if s.Pool == "" || v == nil || holds(v, a.ActivityExecID) {
			continue
		}
		v.Waiters = append(v.Waiters, PoolHolding{Activity: a.ActivityName, ActivityID: a.ActivityExecID, WorkflowID: a.WorkflowExecID, Slots: s.PoolSlots, Since: a.StateTime})
	}
	for _, v := range views {
		sort.SliceStable(v.Waiters, func(i, j int) bool { return v.Waiters[i].Since.Before(v.Waiters[j].Since) })
		v.Waiting = len(v.Waiters)
	}
	return nil
}

func holds(v *PoolView, id string) bool {
	for _, h := range v.Holders {
		if h.ActivityID == id {
			return true
		}
	}
	return false
}

// WritePools writes the pools as a table.
func WritePools(w io.Writer, pools []*PoolView) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "POOL\tSLOTS\tIN USE\tWAITING\tDESCRIPTION")
	for _, p := range pools {
		fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%s\n", inert.String(p.Name), p.Slots, p.InUse, p.Waiting, inert.String(p.Description))
	}
	return tw.Flush()
}

// WritePool writes one pool: its size, its holders and its waiters,
// oldest first.
func WritePool(w io.Writer, p *PoolView, now time.Time) error {
	if !p.Defined {
		fmt.Fprintf(w, "pool %s: not defined (its activities wait: whimbrel pool set %s --slots N)\n", inert.String(p.Name), inert.String(p.Name))
	} else {
		fmt.Fprintf(w, "pool %s: %d slots, %d in use, %d waiting\n", inert.String(p.Name), p.Slots, p.InUse, p.Waiting)
		if p.Description != "" {
			fmt.Fprintf(w, "  %s\n", inert.String(p.Description))
		}
	}
	for _, part := range []struct {
		title string
		rows  []PoolHolding
	}{{"holders", p.Holders}, {"waiters (oldest first)", p.Waiters}} {
		fmt.Fprintf(w, "\n%s:\n", part.title)
		if len(part.rows) == 0 {
			fmt.Fprintln(w, "  none")
			continue
		}
		tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "  ACTIVITY\tWORKFLOW\tSLOTS\tSINCE (UTC)")
		for _, h := range part.rows {
			fmt.Fprintf(tw, "  %s\t%s\t%d\t%s (%s ago)\n", inert.String(orDash(h.Activity)), inert.String(h.WorkflowID), h.Slots,
				h.Since.UTC().Format("2006-01-02 15:04:05"), now.Sub(h.Since).Round(time.Second))
		}
		if err := tw.Flush(); err != nil {
			return err
		}
	}
	return nil
}

// PoolUse is what an activity of a pool has to do with it, for status and
// the web view: whether it holds its slots, or why it waits.
type PoolUse struct {
	Pool    string `json:"pool"`
	Slots   int    `json:"pool_slots"`
	Holding bool   `json:"holding"`
	Waiting string `json:"waiting,omitempty"` // why, e.g. "not defined"
}

// Text says it in a line.
func (u *PoolUse) Text() string {
	if u.Holding {
		return fmt.Sprintf("holds %d slot%s of pool %s", u.Slots, plural(u.Slots), u.Pool)
	}
	return fmt.Sprintf("waiting for pool %s: %s", u.Pool, u.Waiting)
}

func plural(n int) string {
	if n == 1 {
		return ""
	}
	return "s"
}

// poolUse reads the pool of a READY, QUEUED or RUNNING activity whose
// definition names one; nil otherwise. pools caches the pools read.
func poolUse(ctx context.Context, st any, def *definition.Workflow, a *state.ActivityExec, pools map[string]*poolRead) *PoolUse {
	ps, ok := st.(state.PoolStore)
	if !ok || def == nil || def.Activities[a.ActivityName] == nil {
		return nil
	}
	if a.State != state.Ready && !state.HoldsSlots(a, time.Now()) {
		return nil
	}
	s := def.Effective(a.ActivityName)
	if s.Pool == "" {
		return nil
	}
	r := pools[s.Pool]
	if r == nil {
		r = &poolRead{}
		r.p, r.shards, r.err = ps.PoolItems(ctx, s.Pool)
		pools[s.Pool] = r
	}
	u := &PoolUse{Pool: s.Pool, Slots: s.PoolSlots}
	switch {
	case r.err != nil && !errors.Is(r.err, state.ErrNotFound):
		u.Waiting = "cannot be read: " + r.err.Error()
	case state.Holds(r.shards, a.ActivityKey):
		u.Holding = true
	case a.State != state.Ready:
		return u // launched: it holds its slots, as far as this read shows
	case r.p == nil:
		u.Waiting = "not defined"
	default:
		u.Waiting = state.WaitReason(r.p, r.shards, s.PoolSlots)
	}
	if u.Waiting != "" {
		u.Waiting = strings.TrimSpace(u.Waiting)
	}
	return u
}

// poolRead is one read of a pool's items.
type poolRead struct {
	p      *state.Pool
	shards []*state.PoolShard
	err    error
}
