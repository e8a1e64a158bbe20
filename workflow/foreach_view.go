package workflow

import (
	"fmt"
	"sort"
	"strings"

	"github.com/whimbrel/whimbrel/state"
)

// What the views show of a for_each map: its elements counted by where
// they stand, each by its latest attempt (docs/for-each.md).

// ElementCounts are a map's elements by where they stand, each element counted
// by its latest attempt.
type ElementCounts struct {
	Items     int `json:"items"`     // the list's length (0 until listed)
	Created   int `json:"created"`   // elements written so far
	Completed int `json:"completed"` // elements whose latest attempt completed
	Running   int `json:"running"`   // queued, preparing or running
	Waiting   int `json:"waiting"`   // written and not started (READY, a retry's delay included)
	Failed    int `json:"failed"`    // ended FAILED or TIMED_OUT
	Cancelled int `json:"cancelled"` // CANCELLED or CANCELLED_RUNNING
}

// CountElements counts the elements of the named map among acts, from the
// map's own account (m) and the elements' latest attempts.
func CountElements(m *state.ActivityExec, acts []*state.ActivityExec) *ElementCounts {
	if m.Map == "" && !hasElements(acts, m.ActivityName) {
		return nil
	}
	c := &ElementCounts{}
	if acc, err := state.ParseMap(m.Map); err == nil {
		c.Items, c.Created = acc.Items, acc.Created
	}
	for _, a := range LatestElements(acts, m.ActivityName) {
		switch {
		case a.State == state.Completed:
			c.Completed++
		case a.State.EndedBadly():
			c.Failed++
		case a.State == state.Cancelled || a.State == state.CancelledRunning:
			c.Cancelled++
		case a.State == state.Ready || a.State == state.Requested:
			c.Waiting++
		default:
			c.Running++
		}
	}
	return c
}

func hasElements(acts []*state.ActivityExec, name string) bool {
	for _, a := range acts {
		if a.ItemIndex != nil && a.ActivityName == name {
			return true
		}
	}
	return false
}

// LatestElements returns the latest attempt of each element of the named
// map, in index order: the attempt no other retries.
func LatestElements(acts []*state.ActivityExec, name string) []*state.ActivityExec {
	byIndex := map[int]*state.ActivityExec{}
	for _, a := range acts {
		if a.ItemIndex == nil || a.ActivityName != name {
			continue
		}
		cur := byIndex[*a.ItemIndex]
		if cur == nil || max(a.Attempt, 1) > max(cur.Attempt, 1) || a.RetryOf == cur.ActivityExecID {
			byIndex[*a.ItemIndex] = a
		}
	}
	out := make([]*state.ActivityExec, 0, len(byIndex))
	for _, a := range byIndex {
		out = append(out, a)
	}
	sort.Slice(out, func(i, j int) bool { return *out[i].ItemIndex < *out[j].ItemIndex })
	return out
}

// Text says the counts in one line, as in
// "▶ 812/10000 completed · 37 running · 2 failed".
func (c *ElementCounts) Text() string {
	items := c.Items
	if items == 0 && c.Created > 0 {
		items = c.Created
	}
	parts := []string{fmt.Sprintf("%d/%d completed", c.Completed, items)}
	for _, p := range []struct {
		n    int
		what string
	}{{c.Running, "running"}, {c.Waiting, "waiting"}, {c.Failed, "failed"}, {c.Cancelled, "cancelled"}} {
		if p.n > 0 {
			parts = append(parts, fmt.Sprintf("%d %s", p.n, p.what))
		}
	}
	return "▶ " + strings.Join(parts, " · ")
}
